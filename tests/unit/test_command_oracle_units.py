"""Command oracles and signatures, without a repository: the stored document, the identity
verdicts are keyed by, the signature rule, the signature a traceback gives, and the reproduce
line of a command parsed back through the CLI."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from bisector.base.errors import OracleError, UsageError
from bisector.cli import start
from bisector.core.signature import failure_line, refine, signature
from bisector.core.verdict import Outcome, Polarity
from bisector.oracle.command import (
    argv_of,
    bind_match,
    command_oracle,
    oracle_for,
    program,
)
from bisector.oracle.script import foreign_interpreter, load_oracle, parse_metadata
from bisector.run.config import Request, reproduce_command, request_from
from bisector.run.factory import materialise_oracle
from bisector.store.records import OracleRecord

ARGV = ("python", "test/test_x.py", "-k", "it's a \"quoted\"\nline")


def test_a_command_document_round_trips_and_hashes_its_argv() -> None:
    o = command_oracle(ARGV)
    assert argv_of(o.content) == ARGV
    assert o.sha256 == command_oracle(ARGV).sha256  # the same command, the same verdicts
    assert o.sha256 != command_oracle((*ARGV, "-x")).sha256
    assert o.sha256 != command_oracle(ARGV, timeout=60).sha256
    assert "\n" not in o.name and o.name.startswith("python test/test_x.py")
    assert program(o, "/env/bin/python", Path("/x")) == list(ARGV)
    # The marker is what makes it a command: the same JSON line in an oracle file is Python.
    assert argv_of('["python"]\n') is None


def test_command_metadata_carries_dependencies_and_timeout() -> None:
    o = command_oracle(("pytest", "t.py"), timeout=60, dependencies=("pytest>=8",))
    assert o.meta.timeout == 60.0 and o.meta.dependencies == ("pytest>=8",)
    with pytest.raises(OracleError, match="not a requirement"):
        command_oracle(("pytest",), dependencies=("--index-url=http://evil",))


def test_oracle_or_command_but_not_both_nor_neither() -> None:
    with pytest.raises(UsageError, match="both name the oracle"):
        oracle_for("torchlet_norm", ("python", "x.py"))
    with pytest.raises(UsageError, match="no oracle"):
        oracle_for("", ())
    with pytest.raises(UsageError, match="goes with a command oracle"):
        oracle_for("torchlet_norm", (), timeout=5)


def test_a_signature_is_part_of_the_identity_with_its_polarity() -> None:
    o = command_oracle(("python", "t.py"))
    a = bind_match(o, "ValueError: norm", Polarity.FAILURE)
    assert a.sha256 != o.sha256 and a.content == o.content
    assert a.sha256 != bind_match(o, "ValueError: other", Polarity.FAILURE).sha256
    assert a.sha256 != bind_match(o, "ValueError: norm", Polarity.SUCCESS).sha256
    assert bind_match(o, None, Polarity.FAILURE) is o
    with pytest.raises(UsageError, match=r"--match '\(' is not a valid regular expression"):
        bind_match(o, "(", Polarity.FAILURE)


def test_the_stored_signature_is_checked_on_resume(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path))
    monkeypatch.delenv("BISECTOR_CACHE_DIR", raising=False)
    o = bind_match(command_oracle(("python", "t.py")), "Boom", Polarity.FAILURE)
    meta = {"judging": [list(j) for j in o.judging]}
    row = OracleRecord(o.sha256, o.name, o.content.decode(), meta)
    again = materialise_oracle(row)
    assert again.sha256 == o.sha256 and again.match == "Boom"
    edited = OracleRecord(o.sha256, o.name, o.content.decode(),
                          {"judging": [["match", "Other"], ["bug", "failure"]]})
    with pytest.raises(Exception, match="does not match its hash"):
        materialise_oracle(edited)


@pytest.mark.parametrize(
    ("outcome", "bug", "out", "expected"),
    [
        (Outcome.FAIL, Polarity.FAILURE, "ValueError: norm is wrong", None),
        (Outcome.FAIL, Polarity.FAILURE, "ImportError: cannot import name 'x'\n\n",
         (Outcome.SKIP, "a different failure: ImportError: cannot import name 'x'")),
        (Outcome.PASS, Polarity.FAILURE, "fine", None),
        (Outcome.TIMEOUT, Polarity.FAILURE, "", None),
        # --regress success: exit 0 is the bug, so the signature speaks of passing runs.
        (Outcome.PASS, Polarity.SUCCESS, "reproduced: something else",
         (Outcome.SKIP, "passed without the signature: reproduced: something else")),
        (Outcome.FAIL, Polarity.SUCCESS, "anything", None),
    ],
)
def test_the_signature_rule(outcome: Outcome, bug: Polarity, out: str,
                            expected: tuple[Outcome, str] | None) -> None:
    assert refine(outcome, "", out, r"ValueError: norm|^reproduced: the bug$", bug) == expected


TRACEBACK = """\
some log line 0x1
Traceback (most recent call last):
  File "/home/u/repro.py", line 12, in <module>
    f(x)
  File "/home/u/repro.py", line 9, in f
    raise Boom
repro.Boom: object <Foo at 0x7f3a2b> has 42 items (limit 7)
"""


def test_a_traceback_gives_its_exception_line_generalised() -> None:
    assert failure_line(TRACEBACK) == "repro.Boom: object <Foo at 0x7f3a2b> has 42 items (limit 7)"
    sig = signature(TRACEBACK)
    assert sig is not None
    assert re.search(sig, "repro.Boom: object <Foo at 0xdeadbeef> has 3 items (limit 9)",
                     re.M)
    assert not re.search(sig, "repro.Boom: object <Bar at 0x1> has 3 items (limit 9)")
    # pytest's E lines; nothing that names a failure: no signature.
    assert signature("E       AssertionError: 3 != 4\n=== 1 failed in 0.1s ===") == (
        r"AssertionError: \d+ != \d+")
    assert signature("all good\n") is None


def test_a_foreign_shebang_runs_itself(tmp_path: Path) -> None:
    sh = tmp_path / "check.sh"
    sh.write_text("#!/bin/sh\n# /// script\n# [tool.bisector]\n# timeout = 5\n# ///\nexit 1\n")
    o = load_oracle(str(sh))  # not compiled as Python
    assert not o.python and o.meta.timeout == 5.0
    assert program(o, "/env/bin/python", Path("/run/check.sh")) == ["/run/check.sh"]
    for line in ("#!/usr/bin/env python3", "#!/usr/bin/python3.12 -u", ""):
        assert foreign_interpreter(f"{line}\nprint(1)\n".encode()) is None


def test_match_in_metadata_is_validated() -> None:
    ok = parse_metadata('# /// script\n# [tool.bisector]\n# match = "NameError: .*_R__"\n'
                        '# ///\n')
    assert ok.match == "NameError: .*_R__"
    with pytest.raises(OracleError, match="match '\\(' is not a valid regular expression"):
        parse_metadata('# /// script\n# [tool.bisector]\n# match = "("\n# ///\n')


def test_a_command_reproduces_through_the_cli() -> None:
    req = Request(good="a", bad="b", repo=Path("/r"), command=ARGV, match="E: x( y)?",
                  timeout=30.0, dependency=("pytest",))
    line = reproduce_command(req)
    assert "--oracle" not in line and line.endswith("-- " + shlex.join(ARGV))
    args = shlex.split(line)
    again = request_from(dict(start.make_context("start", args[2:]).params))
    assert again == req


def test_configured_defaults_that_do_not_apply_are_dropped() -> None:
    """bisector.toml's `oracle` yields to a typed command; its `timeout` to an oracle file."""
    from bisector.cli.tools import unconfigured

    conf = {"oracle": "torchlet_norm", "timeout": 5.0, "dependency": ["pytest"]}
    ctx = start.make_context("start", ["--good", "a", "--bad", "b", "--", "python", "t.py"],
                             default_map=conf)
    req = request_from(unconfigured(ctx, dict(ctx.params)))
    assert (req.oracle, req.command, req.timeout) == ("", ("python", "t.py"), 5.0)
    ctx = start.make_context("start", ["--good", "a", "--bad", "b"], default_map=conf)
    req = request_from(unconfigured(ctx, dict(ctx.params)))
    assert (req.oracle, req.timeout, req.dependency) == ("torchlet_norm", None, ())
