"""Command oracles (``bisect start ... -- CMD ARGS...``) and the oracle a request names.

Like ``git bisect run``: the command runs in the probed commit's exported tree (so
``python test/test_inductor.py -k test_foo`` and ``pytest test/x.py::test_y`` find their files),
with the probed environment's ``bin`` first on PATH (so ``python`` and ``pytest`` are the
environment's), and its exit status answers as an oracle's does.

A command is stored as a small document: a marker line, a PEP 723 block when ``--dependency``
or ``--timeout`` were given, and the argv as one JSON line. The document is hashed like an
oracle file, so the command (marker and argv, its dependencies and timeout) is the verdicts'
identity: two different commands never share verdicts, and the same command in two bisections
reuses them. Every part of bisector that reads an oracle's bytes (its metadata, ``resume``,
``bisect gc``) reads this document the same way. A script the command names by path is not
part of it (use ``--oracle PATH`` for a script whose edits must count).

:func:`oracle_for` is the one place a request's ``--oracle`` / ``-- CMD`` / ``--match``
become the :class:`~bisector.oracle.script.Oracle` that ``start``, ``plan`` and ``check`` run.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

from bisector.base.errors import UsageError
from bisector.core.signature import compile_match
from bisector.core.verdict import Polarity
from bisector.oracle.script import MARKER, Oracle, argv_of, load_oracle, parse_metadata

__all__ = ["MARKER", "argv_of"]  # a command's document is read where an Oracle is

NAME_CHARS = 100  # a command's name in `bisect list` and reports; the argv itself is whole


def document(argv: tuple[str, ...], *, timeout: float | None = None,
             dependencies: tuple[str, ...] = (), threshold: str | None = None) -> str:
    """The stored text of a command oracle (deterministic: the same inputs, the same hash).
    ``threshold`` makes it a performance oracle (it prints a BISECTOR_RESULT line)."""
    block = []
    if dependencies:
        block.append(f"# dependencies = [{', '.join(json.dumps(d) for d in dependencies)}]")
    table = [*([f"# timeout = {float(timeout)!r}"] if timeout is not None else []),
             *([f"# threshold = {json.dumps(threshold)}"] if threshold is not None else [])]
    if table:
        block += ["# [tool.bisector]", *table]
    head = ["# /// script", *block, "# ///"] if block else []
    return "\n".join([MARKER, *head, json.dumps(list(argv))]) + "\n"


# The first line of the inline reader of a dashboard oracle (oracle/dashboard.py).
READER_MARK = "# bisector: a benchmark's CSV read into samples"


def reads_benchmark(argv: tuple[str, ...]) -> bool:
    """``python -c READER ... -- CMD``: a dashboard oracle, named and reproduced by CMD."""
    return (len(argv) > 3 and argv[1] == "-c" and argv[2].startswith(READER_MARK + "\n")
            and "--" in argv[3:])


def name_of(argv: tuple[str, ...]) -> str:
    """What lists and reports call a command oracle: the command, on one line, shortened. A
    command run through an inline reader (``python -c CODE ... -- CMD``: the dashboard's
    benchmark oracles) is called by the command it runs."""
    if reads_benchmark(argv):
        argv = argv[argv.index("--", 3) + 1:] or argv
    line = " ".join(shlex.join(argv).split())
    return line if len(line) <= NAME_CHARS else line[:NAME_CHARS - 1] + "…"


def command_oracle(argv: tuple[str, ...], *, timeout: float | None = None,
                   dependencies: tuple[str, ...] = (), threshold: str | None = None) -> Oracle:
    text = document(argv, timeout=timeout, dependencies=dependencies, threshold=threshold)
    name = name_of(argv)
    return Oracle(name=name, path=Path("command"), content=text.encode(),
                  meta=parse_metadata(text, f"the command {name}"))


def program(oracle: Oracle, python: str, script: Path) -> list[str]:
    """What to execute for one run: the command as given; a script with a foreign ``#!``
    itself (the kernel reads its first line); any other oracle with the environment's
    python."""
    argv = oracle.argv
    if argv is not None:
        return list(argv)
    if not oracle.python:
        return [str(script)]
    return [python, str(script)]


def check_match(regex: str, where: str = "--match") -> None:
    """A signature that cannot be searched is a one-line usage error naming it."""
    try:
        compile_match(regex)
    except ValueError as e:
        raise UsageError(f"{where} {regex!r} is not a valid regular expression ({e}): fix "
                         f"it (re syntax, searched line by line with re.MULTILINE)") from None


def bind_match(oracle: Oracle, given: str | None, bug: Polarity) -> Oracle:
    """The oracle judged by its signature (``--match`` wins over its metadata's ``match``)
    under the polarity the bisection judges with; unchanged when there is no signature."""
    match = given if given is not None else oracle.meta.match
    if match is None:
        return oracle
    check_match(match)
    if oracle.meta.performance:
        raise UsageError(f"--match with the performance oracle {oracle.name}: its runs are "
                         f"judged by their samples, not by the failure they print; drop it")
    return replace(oracle, judging=(("match", match), ("bug", bug.value)))


def oracle_for(spec: str, command: tuple[str, ...], *, timeout: float | None = None,
               dependencies: tuple[str, ...] = (), oracles_dir: Path | None = None,
               threshold: str | None = None) -> Oracle:
    """``--oracle NAME|PATH`` or ``-- CMD``: exactly one; ``--timeout`` and ``--dependency``
    belong to a command (an oracle file says both in its own metadata)."""
    if spec and command:
        raise UsageError(f"--oracle {spec} and a command after -- both name the oracle: give "
                         f"one of them")
    if not spec and not command:
        raise UsageError("no oracle: give --oracle NAME|PATH, or a command after -- "
                         "(bisect start ... -- python test/test_x.py -k test_y)")
    if not command:
        if timeout is not None or dependencies or threshold is not None:
            flag = ("--timeout" if timeout is not None else "--threshold"
                    if threshold is not None else "--dependency")
            raise UsageError(f"{flag} goes with a command oracle (-- CMD); the oracle {spec} "
                             f"says its timeout and dependencies in its [tool.bisector] and "
                             f"dependencies metadata")
        return load_oracle(spec, oracles_dir)
    if timeout is not None and not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give a positive number of seconds")
    # A malformed --dependency is refused by the metadata's own check (OracleError).
    return command_oracle(command, timeout=timeout, dependencies=dependencies,
                          threshold=threshold)
