"""The prior from the failure (issue 23), end to end: a generated torchlet history whose oracle
fails with a traceback through the file the culprit changed; with ``--prior auto`` the search
probes there first and needs fewer probes than ``--prior none``, for the same culprit, and
``show`` and ``plan`` say which prior was used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from tests.support import bisect, failing_in_ops, forty_commits, invoke, run_cli

pytestmark = [pytest.mark.e2e]

COMMAND = failing_in_ops("def check_norm(v):\n    raise AssertionError(v)\ncheck_norm(v)\n")


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> SyntheticHistory:
    return forty_commits(tmp_path_factory, "prior")


def own_probes(d: dict[str, object]) -> int:
    probes = d["probes"]
    assert isinstance(probes, list)
    return sum(1 for p in probes if not p["reused"])


def test_the_prior_finds_the_same_culprit_in_fewer_probes(home: Path,
                                                          hist: SyntheticHistory) -> None:
    plain = bisect(home / "plain.db", hist, "--prior", "none", "--", *COMMAND)
    weighted = bisect(home / "prior.db", hist, "--", *COMMAND)
    assert plain["culprit"]["sha"] == weighted["culprit"]["sha"] == hist.culprit
    assert own_probes(weighted) < own_probes(plain), (own_probes(weighted), own_probes(plain))

    prior = weighted["prior"]
    assert prior["mode"] == "auto" and prior["used"] is True
    assert prior["evidence"]["files"] == ["torchlet/ops.py"]
    assert prior["matched"] >= 1  # the culprit, and commits elsewhere in torchlet/ (weaker)
    assert prior["probes"] == own_probes(weighted)
    assert prior["plain_probes"] == own_probes(plain)
    assert prior["expected_probes"]["prior"] < prior["expected_probes"]["plain"]
    assert plain["prior"]["mode"] == "none" and plain["prior"]["used"] is False

    shown = invoke("--db", str(home / "prior.db"), "show", "1")
    assert shown.exit_code == 0
    assert f"Prior: auto, from the failure: {prior['matched']} of 39 candidates" in shown.stdout

    # `plan` with the same request reads the stored failure of the bad endpoint.
    r = run_cli("--db", str(home / "prior.db"), "plan", "--repo", str(hist.path), "--good",
                hist.main[0], "--bad", hist.main[-1], "--json", "--", *COMMAND)
    assert r.returncode == 0, r.stderr
    planned = json.loads(r.stdout)["prior"]
    assert planned["used"] is True and planned["evidence"]["files"] == ["torchlet/ops.py"]
