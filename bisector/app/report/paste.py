"""Shell words a reader pastes on another machine (the issue's commands: by hand, the compiler
pass's replay, the bisector line, the compile-debugging lines).

A word is scrubbed on its own (``portable.scrubber``: this machine's paths become placeholders),
then every placeholder becomes shell text that means the same on the reader's machine, and the
rest of the word is quoted with :func:`shlex.quote`. A ``<placeholder>`` never reaches a shell
unquoted: pasted, ``sh <repo>/orc.sh`` reads ``<repo`` as input redirection, and a ``>`` form
would create or truncate a file. A path inside the clone becomes:

* ``./orc.sh`` where the command runs at the clone's root (the block has ``cd`` there), see
  :data:`ROOT`;
* ``"$PWD"/NAME/orc.sh`` in a line typed beside the clone (``bisect start --repo NAME``, whose
  oracle runs in each probed commit's tree and so needs the clone's file by a full path), see
  :func:`beside`.

The other placeholders: the home folder is ``"$HOME"``, bisector's folders are
``"${BISECTOR_HOME:?}"``, ``"${BISECTOR_HOME:?}"/data`` and ``"${BISECTOR_CACHE_DIR:?}"``
(the variables bisector reads;
unset, the shell stops with their name instead of reading another file), the user of
``torchinductor_USER`` is ``"$USER"``. An oracle environment (``--env NAME=VALUE``) is a prefix
of assignments, a secret's value the reader's own (``HF_TOKEN="$HF_TOKEN"``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Mapping

from bisector.base.redact import secret_name

Scrub = Callable[[str], str]

REPO = "<repo>"
ROOT = "."  # the clone, where a block runs at its root
_SHELL = {"<bisector-home>": '"${BISECTOR_HOME:?}"',
          "<bisector-data>": '"${BISECTOR_HOME:?}"/data',
          "<bisector-cache>": '"${BISECTOR_CACHE_DIR:?}"',
          "<user>": '"$USER"', "~": '"$HOME"'}
# The placeholders portable.scrubber writes; ``~`` only where a shell would read it as the home
# folder (a word's start, after ``=`` or ``:``).
_PLACE = re.compile(r"<repo>|<bisector-(?:home|data|cache)>|<user>|(?:^|(?<=[=:]))~(?=/|$)")


def unchanged(text: str) -> str:
    """The scrub of a text that stays on this machine."""
    return text


def beside(name: str) -> str:
    """The clone as shell text in a line typed in the folder that holds it."""
    return '"$PWD"/' + shlex.quote(name)


def word(text: str, scrub: Scrub = unchanged, repo: str = ROOT) -> str:
    """``text`` as one shell word with this machine's paths rewritten: the clone as ``repo``
    (shell text: :data:`ROOT` or :func:`beside`), the other placeholders as above, the rest
    quoted."""
    s = scrub(text)
    if s == text:
        return shlex.quote(text)
    out, at = [], 0
    for m in _PLACE.finditer(s):
        out += [_quoted(s[at:m.start()]), repo if m[0] == REPO else _SHELL[m[0]]]
        at = m.end()
    out.append(_quoted(s[at:]))
    return "".join(out) or "''"


def _quoted(s: str) -> str:
    return shlex.quote(s) if s else ""


def join(argv: Iterable[str], scrub: Scrub = unchanged, repo: str = ROOT) -> str:
    """A command line of :func:`word` words."""
    return " ".join(word(a, scrub, repo) for a in argv)


def env(pairs: Mapping[str, str], scrub: Scrub = unchanged, repo: str = ROOT) -> str:
    """The oracle environment as assignments before a command (``A=1 B='x y' ``, with the
    trailing space; "" without one): a name stays unquoted (a quoted ``NAME=`` is no
    assignment), its value is a :func:`word`; a secret's value is the reader's own."""
    return "".join(f"{k}=" + (f'"${k}"' if secret_name(k) else word(v, scrub, repo)) + " "
                   for k, v in sorted(pairs.items()))
