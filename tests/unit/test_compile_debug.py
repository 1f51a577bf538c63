"""A compile failure's reports say how to look inside it at the culprit, with `bisect check`
lines the CLI takes."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from bisector.app.report import compile_debug
from bisector.cli.tools import check
from bisector.core.verdict import Polarity
from bisector.project.profiles import report_names
from bisector.run.config import Request

pytestmark = pytest.mark.unit

CULPRIT = "c" * 40
INDUCTOR = ("Traceback (most recent call last):\n  File \"/x/torch/_inductor/graph.py\", line 3\n"
            "torch._inductor.exc.InductorError: LoweringException: boom")


def _d(profile: str = "pytorch", tail: str = INDUCTOR, source: str = "import torch\n",
       culprit: bool = True) -> dict[str, Any]:
    return {"project": report_names(profile, "/src/pytorch"),
            "culprit": {"sha": CULPRIT} if culprit else None,
            "oracle": {"source": source, "name": "o"},
            "probes": [{"sha": CULPRIT, "verdict": "bad", "output_tail": tail},
                       {"sha": "b" * 40, "verdict": "good", "output_tail": ""}]}


REQ = Request("v1", "v2", "my_oracle", repo=Path("/src/pytorch"), regress=Polarity.FAILURE,
              match="InductorError", env=("TORCHINDUCTOR_FREEZING=1", "HF_TOKEN=hf_x"))


def _parse(line: str) -> dict[str, Any]:
    args = shlex.split(line)
    assert args[:2] == ["bisect", "check"]
    return dict(check.make_context("check", args[2:]).params)


@pytest.mark.parametrize(("d", "expected"), [
    (_d(), "aot"),
    (_d(tail="torch._dynamo.exc.Unsupported: call_function"), "dynamo"),
    (_d(tail="AssertionError", source="import torch\nf = torch.compile(g)\n"), "dynamo"),
    (_d(tail="AssertionError"), None),  # no compiler in sight
    (_d(profile="torchlet"), None),  # not PyTorch
    (_d(culprit=False), None),  # no culprit to run at
])
def test_which_failures_get_hints(d: dict[str, Any], expected: str | None) -> None:
    h = compile_debug.hints(d, REQ)
    assert (h["after"] if h else None) == expected


def test_every_hint_is_a_check_line_the_cli_takes_at_the_culprit() -> None:
    h = compile_debug.hints(_d(), REQ)
    assert h is not None and len(h["steps"]) == 3
    seen: list[tuple[str, ...]] = []
    for step in h["steps"]:
        first = step["command"]
        params = _parse(first)
        assert params["commit"] == CULPRIT and params["oracle"] == "my_oracle"
        assert params["repo"] == Path("/src/pytorch") and params["match"] == "InductorError"
        assert "TORCHINDUCTOR_FREEZING=1" in params["env_words"]  # the bisection's own env
        assert "HF_TOKEN=***" in params["env_words"] and "hf_x" not in first
        seen.append(params["env_words"])
    assert f"TORCH_LOGS={compile_debug.LOGS}" in seen[0]
    assert {"TORCHDYNAMO_REPRO_AFTER=aot", "TORCHDYNAMO_REPRO_LEVEL=4",
            f"TORCH_COMPILE_DEBUG_DIR=$PWD/compile-debug-{CULPRIT[:12]}"} <= set(seen[1])
    assert f"TORCH_TRACE=$PWD/trace-{CULPRIT[:12]}" in seen[2]
    assert h["steps"][2]["then"] == f'tlparse "$PWD/trace-{CULPRIT[:12]}"'


def test_a_command_oracle_goes_after_the_dashes() -> None:
    req = Request("v1", "v2", "", repo=Path("/r"), command=("python", "t.py", "-k", "a b"),
                  dependency=("pytest",), timeout=30.0)
    h = compile_debug.hints(_d(), req)
    assert h is not None
    line = h["steps"][0]["command"]
    assert line.endswith("-- python t.py -k 'a b'")
    params = _parse(line)
    assert params["command"] == ("python", "t.py", "-k", "a b")
    assert params["dependency"] == ("pytest",) and params["timeout"] == 30.0


def test_markdown_fences_each_command() -> None:
    lines = compile_debug.markdown(compile_debug.hints(_d(), REQ))
    assert any("Debugging the compile failure" in x for x in lines)
    assert sum(x.startswith("bisect check --commit") for x in lines) == 3
    assert compile_debug.markdown(None) == []
