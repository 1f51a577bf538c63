"""How ``bisect`` fails: one ``error: ...`` line on stderr saying what to do, the exit code of
bisector.base.errors, the traceback only with ``--debug``, and under ``--json`` the same error as
one JSON object on stdout. ``main()`` in cli/__init__.py runs the click group through here.
"""

from __future__ import annotations

import errno
import itertools
import json
import sys
from collections.abc import Callable
from typing import NoReturn

import click

from bisector.base.errors import BisectorError, UsageError
from bisector.base.escape import safe_text
from bisector.base.extras import missing_extra
from bisector.cli.console import err, escape, set_quiet


def json_error(args: list[str], message: str, kind: str, exit_code: int) -> None:
    """Under ``--json`` a failure is JSON on stdout too: a script that parses stdout gets an
    object naming the error, not an empty stream and a line on stderr it never reads."""
    if "--json" in args or "--format=json" in args or any(
            a == "--format" and b == "json" for a, b in itertools.pairwise(args)):
        click.echo(json.dumps({"error": {"message": safe_text(message), "kind": kind,
                                         "exit_code": exit_code}}))


def run(group: click.Group, args: list[str], prog_name: str | None,
        store_named: Callable[[], str]) -> None:
    """``group`` on ``args``, each failure mapped; ``store_named``: the store the command
    opened, as its line names it when a query meets a damaged page or a full disk."""
    debug = "--debug" in args
    try:
        group.main(args=args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        set_quiet(False)  # -q silences progress, never an error
        err.print("error: aborted")
        json_error(args, "aborted", "Abort", 130)
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as e:
        # `bisect` (or `bisect oracle`) alone: the help, as click prints it (usage, options,
        # the commands), on stderr with click's exit code 2; no error to fold into a line.
        e.show()
        sys.exit(e.exit_code)
    except click.ClickException as e:
        set_quiet(False)  # -q silences progress, never an error
        # One line, as every other error: what was wrong and where help is (click's own
        # rendering is four lines with a usage banner).
        message = " ".join(e.format_message().split())
        usage = getattr(e, "ctx", None)
        see = f" (see `{usage.command_path} --help`)" if usage is not None else ""
        err.print(f"[red]error:[/] {escape(message)}{escape(see)}", soft_wrap=True)
        json_error(args, message, type(e).__name__, e.exit_code)
        sys.exit(e.exit_code)
    except BisectorError as e:
        fail(args, e, debug)
    except KeyboardInterrupt:
        set_quiet(False)  # -q silences progress, never an error
        err.print("error: interrupted")
        json_error(args, "interrupted", "KeyboardInterrupt", 130)
        sys.exit(130)
    except ModuleNotFoundError as e:
        needed = missing_extra(e)
        if needed is None:
            raise
        fail(args, UsageError(needed), debug)
    except Exception as e:
        # A damaged SQLite page met by a query (a large store is not read whole when a command
        # that only reads opens it), or a full disk (SQLite's SQLITE_FULL, ENOSPC): one line as
        # well. Anything else is a bug, with its traceback.
        full = isinstance(e, OSError) and e.errno == errno.ENOSPC
        if not full and "sqlalchemy" not in sys.modules and "sqlite3" not in sys.modules:
            raise
        from bisector.store.trouble import store_trouble  # lazy: only on this path

        line = store_trouble(e, store_named())
        if line is None:
            raise
        fail(args, line, debug)


def fail(args: list[str], e: BisectorError, debug: bool) -> NoReturn:
    """One line (and exit code) for an error a user can act on; the traceback with --debug."""
    set_quiet(False)  # -q silences progress, never an error
    if debug:
        err.print_exception()
    err.print(f"[red]error:[/] {escape(e.message)}", soft_wrap=True)
    json_error(args, e.message, type(e).__name__, e.exit_code)
    sys.exit(e.exit_code)
