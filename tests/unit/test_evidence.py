"""What the HTML report draws beside the timeline for a performance or flaky answer."""

from __future__ import annotations

import pytest

from bisector.app.report.evidence import evidence

pytestmark = pytest.mark.unit


def _d(result: dict[str, object], probes: list[dict[str, object]], n: int = 10
       ) -> dict[str, object]:
    return {"candidates": n, "result": result, "probes": probes}


def test_a_performance_answer_draws_changes_threshold_and_drift() -> None:
    rows = [{"position": 5, "sha": "a" * 40, "verdict": "bad", "change": 0.45, "runs": 7,
             "pairs": 7}, {"position": 4, "sha": "b" * 40, "verdict": "good", "change": 0.01,
                           "runs": 7, "pairs": 7}]
    probes = [{"position": 0, "facts": {"perf": {"samples": [1.0 + i / 10] * 3}}}
              for i in range(4)]
    g = evidence(_d({"perf": {"threshold": 0.2, "unit": "ms", "commits": rows}}, probes))
    assert g is not None and g["kind"] == "perf"
    bad, good = g["points"]
    assert bad["y"] < g["threshold"] < good["y"] <= g["zero"] + 1  # up = worse
    assert bad["x"] > good["x"]
    assert len(g["drift"]) == 4 and g["drift"][0]["y"] > g["drift"][-1]["y"]  # it slowed


def test_a_flaky_answer_draws_the_posterior_tallest_at_the_culprit() -> None:
    probes = [{"position": p, "verdict": v} for p, v in
              [(0, "good")] * 3 + [(9, "bad")] * 3 + [(5, "bad")] * 6 + [(4, "good")] * 6]
    g = evidence(_d({"noisy": {"probability": 0.99}}, probes))
    assert g is not None and g["kind"] == "posterior"
    tallest = max(g["bars"], key=lambda b: b["h"])
    assert tallest["title"].startswith("commit 5:")
    assert g["caption"].startswith("no regression at all: probability 0.0")
    # A range whose endpoints fail alike: "no regression" is the likelier, and says so.
    alike = [{"position": p, "verdict": v} for p, v in
             [(0, "good"), (0, "bad"), (9, "good"), (9, "bad")] * 4]
    flat = evidence(_d({"noisy": {"probability": 0.1}}, alike))
    assert flat is not None and float(flat["caption"].rsplit(" ", 1)[1]) > 0.5


def test_a_plain_answer_draws_nothing_more() -> None:
    assert evidence(_d({"kind": "culprit"}, [])) is None


def test_the_issue_reproduce_line_names_what_ran_and_what_the_user_chose() -> None:
    """Issue 31, item 5: the line said ``--variant cu128`` for +cu130 torches and carried the
    box image's CUDA_VERSION and TORCH_CUDA_ARCH_LIST."""
    from pathlib import Path

    from bisector.app.report.portable import reproduce
    from bisector.run.config import Request

    req = Request(good="v1", bad="v2", oracle="name_mangling", repo=Path("/x/pytorch"),
                  variant="cu128", env=("CUDA_VERSION=12.8.1", "TORCH_CUDA_ARCH_LIST=9.0",
                                        "TORCH_LOGS=recompiles"))
    d = {"github": "pytorch/pytorch", "repo": "/x/pytorch", "good": {}, "bad": {},
         "probes": [{"facts": {"package_version": "2.11.0+cu130"}}] * 3}
    line = reproduce(d, req)
    assert "--variant cu130" in line and "cu128" not in line
    assert "TORCH_LOGS=recompiles" in line
    assert "CUDA_VERSION" not in line and "TORCH_CUDA_ARCH_LIST" not in line
