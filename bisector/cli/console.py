"""The CLI's two consoles (progress on stderr, results on stdout), made on first use.

rich costs more to import than click itself, and `bisect --help`, `bisect list` on an empty
store and every TAB completion print nothing through rich: so ``err`` and ``out`` are stand-ins
that build the real :class:`rich.console.Console` the first time anything is asked of them.
:func:`escape` is the CLI's one filter for text put into a rich markup string (see
bisector/cli/progress.py); ``-q`` silences ``err`` through :func:`set_quiet`.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, cast

from bisector.base.escape import safe_text

if TYPE_CHECKING:
    from rich.console import Console


class _Deferred:
    """A Console made on first attribute access; reads and writes go to it from then on.

    Handed to rich (a Progress's ``console``) it still behaves as the console: every attribute
    is the real one's. ``quiet`` set before the console exists is kept for its creation, so
    resetting it on every command costs no rich import."""

    _kwargs: dict[str, Any]
    _console: Console | None

    def __init__(self, **kwargs: Any) -> None:
        object.__setattr__(self, "_kwargs", kwargs)
        object.__setattr__(self, "_console", None)

    def real(self) -> Console:
        if self._console is None:
            # lazy: rich is loaded by the first command that prints through it
            from rich.console import Console

            object.__setattr__(self, "_console", Console(**self._kwargs))
        assert self._console is not None
        return self._console

    def set_quiet(self, quiet: bool) -> None:
        if self._console is None:
            self._kwargs["quiet"] = quiet
        else:
            self._console.quiet = quiet

    def is_quiet(self) -> bool:
        return bool(self._kwargs.get("quiet") if self._console is None else
                    self._console.quiet)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real(), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.real(), name, value)


_err = _Deferred(stderr=True, highlight=False, soft_wrap=True)
_out = _Deferred(highlight=False, soft_wrap=True)
err = cast("Console", _err)
out = cast("Console", _out)


def real(console: Console) -> Console:
    """The console itself behind ``err`` or ``out`` (for code that checks its type)."""
    return console.real() if isinstance(console, _Deferred) else console


def set_quiet(quiet: bool) -> None:
    """``bisect -q``: progress, notes and warnings on stderr are dropped; errors are printed
    after ``set_quiet(False)`` (bisector.cli.main does), results on stdout never pass here."""
    _err.set_quiet(quiet)


def is_quiet() -> bool:
    return _err.is_quiet()


def escape(text: str) -> str:
    """``text`` as a rich markup string shows it: redacted, printable, markup escaped."""
    # lazy: only a command that prints markup needs rich's escaping (and has rich loaded)
    from rich.markup import escape as markup_escape

    return markup_escape(safe_text(text))


def _sigterm(_signum: int, _frame: Any) -> NoReturn:
    raise KeyboardInterrupt


@contextmanager
def interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM both raise KeyboardInterrupt inside the block: SIGINT may start out
    ignored (a background job of a non-interactive shell), and a bisection or a watch must
    always stop cleanly and say how to go on."""
    old = signal.signal(signal.SIGTERM, _sigterm)
    old_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
        signal.signal(signal.SIGINT, old_int)
