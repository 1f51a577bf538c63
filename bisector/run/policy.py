"""What this process was told beyond one bisection's options, resolved once into a value.

The team's object store is given three ways: ``--artifacts``, else ``$BISECTOR_ARTIFACTS``,
else ``[artifacts] url`` in the user's ``bisector.toml`` (never a repository's file: where
wheels go is the user's choice). :func:`resolve` is the one place that reads them: the CLI's
group calls it once per command, from the command line, an explicit environment mapping and
the user's file as ``cli/config_file.py`` read it, and hands the frozen :class:`Policy` down
(the command's context, then the application's functions, then ``run/factory.py``, where a
provider's object store is made). Nothing writes the choice back into ``os.environ`` for our
own code to find again (environment variables are for the processes we start), and nothing
below reads the variable or the file again: every provider of one command sees one choice.

A ``NamedTuple``, not a dataclass: every command resolves one, and importing ``dataclasses``
would add to the start of each (make bench, section 12).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from bisector.artifacts.remote import Address

ENV = "BISECTOR_ARTIFACTS"


class Policy(NamedTuple):
    """A command's resolved choices that are not a bisection's (those are its ``Request``)."""

    # The team's object store for wheels; None: local work only.
    artifacts: Address | None = None


# No object store: what a caller that was given no policy (a test, a library use) works with.
LOCAL = Policy()


def resolve(flag: str | None, environ: Mapping[str, str],
            configured: Address | None = None) -> Policy:
    """The policy in force: ``--artifacts`` (``flag``), else ``$BISECTOR_ARTIFACTS`` in
    ``environ``, else ``configured`` (the user's ``[artifacts] url``, checked as the file was
    read). A bad URL is one line naming where it came from."""
    if flag:
        return Policy(_parse(flag, "--artifacts"))
    if environ.get(ENV):
        return Policy(_parse(environ[ENV], f"${ENV}"))
    return Policy(configured)


def _parse(url: str, where: str) -> Address:
    # lazy: only a command given an object store loads its URL parser (the artifacts floor)
    from bisector.artifacts.remote import parse

    return parse(url, where)
