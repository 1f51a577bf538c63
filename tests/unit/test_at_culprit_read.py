"""What the helpers run at a culprit may say (oracle/at_culprit.py): only fields of the shapes
bisector expects reach a report or a command, whatever the probed environment printed."""

from __future__ import annotations

import json

import pytest

from bisector.app.report import compiler_pass
from bisector.oracle.at_culprit import compiler_bisect_oracle, read_compiler, read_env
from bisector.oracle.command import command_oracle
from bisector.project.dashboard import parse

pytestmark = [pytest.mark.unit]


def test_a_planted_result_keeps_only_its_expected_shapes() -> None:
    raw = {"compiler_bisector": {
        "available": True, "runs": "17; rm -rf ~", "seconds": 3.5,
        "found": {"backend": "inductor; curl evil", "subsystem": "lowerings",
                  "bisect_number": True, "kind": "bisect",
                  "node": {"node": "`x`" * 400, "target": 7}}}}
    c = read_compiler(raw)
    assert "runs" not in c and c["seconds"] == 3.5
    assert "backend" not in c["found"] and "bisect_number" not in c["found"]
    assert len(c["found"]["node"]["node"]) == 500 and "target" not in c["found"]["node"]
    # No command is made from what was dropped: the replay names only checked fields.
    lines = compiler_pass.replay(c, "python ./o.py")
    assert lines == ["python -m torch._inductor.compiler_bisector run python ./o.py"]
    assert read_compiler({"compiler_bisector": "x"}) == {
        "error": "the compiler bisector's run printed no result"}
    assert read_env({"collect_env": "  "}) is None and read_env(None) is None


def test_the_helper_carries_a_file_oracle_and_a_command_runs_in_its_tree() -> None:
    cmd = command_oracle(("pytest", "test/x.py"), timeout=60.0)
    helper = compiler_bisect_oracle(cmd)
    assert helper.argv is not None and helper.argv[:2] == ("python", "-c")
    assert helper.meta.timeout == 60.0 * 40 and helper.meta.threshold is None
    assert '\\"argv\\": [\\"pytest\\", \\"test/x.py\\"]' in helper.argv[2]


def test_a_report_cannot_choose_the_benchmark_flags() -> None:
    sha = "a" * 40
    series = {"group_info": {"suite": "torchbench", "model": "m", "metric": "speedup",
                             "mode": "--output=/etc/x", "dtype": "amp"},
              "points": [{"commit": "b" * 40, "flag": True, "value": 0.5}],
              "all_baseline_points": [{"commit": sha, "value": 1.0}], "label": "regression",
              "policy": {"threshold": 0.95}}
    other = {**series, "group_info": {**series["group_info"], "mode": "eval"}}
    eager = {**series, "group_info": {**series["group_info"], "mode": "inference",
                                      "compiler": "aot_eager"}}
    upside = {**series, "group_info": {**series["group_info"], "mode": "inference"},
              "policy": {"threshold": 1.05, "condition": "less_equal"}}
    rep = parse(json.dumps({"report": {"results": [series, other, eager, upside]}}))
    assert rep.ranges == ()
    assert "compiler aot_eager is not inductor" in rep.skipped[2]
    assert "condition less_equal contradicts speedup" in rep.skipped[3]
    assert "'--output=/etc/x' is not a plain name" in rep.skipped[0]
    assert "mode 'eval' is no flag of the benchmark scripts" in rep.skipped[1]
