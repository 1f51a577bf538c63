"""``bisect plan`` prices an oracle by its own runs only (issue 50, item 3). An oracle that has
not run in this store is priced by its kind (its project's default oracle run; a dashboard
report's benchmark by its models' usual time: tests/integration/test_from_report.py) and the
plan says so; another oracle's runs on the same repository never price it (a 30 s oracle was
once projected at 2 s from them). Pairs are named for a performance oracle alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.base.kinds import ArtifactKind, ArtifactStatus
from bisector.core.verdict import Outcome, Polarity
from bisector.infra.owner import owner_id
from bisector.oracle.script import Oracle, OracleMeta
from bisector.store import bisections
from bisector.store import runs as run_store
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import open_store
from bisector.store.records import NewArtifact, NewRun
from tests.support import invoke

QUICK = Oracle("quick", Path("quick.py"), b"raise SystemExit(0)\n", OracleMeta())


def _quick_runs(db: Path, hist: SyntheticHistory, seconds: float, runs: int) -> None:
    """``runs`` paid-for runs of another oracle (QUICK) on this repository, each ``seconds``,
    stored as a bisection of it stores them."""
    store = open_store(str(db))
    cands = hist.main
    bisections.save_oracle(store, QUICK.sha256, QUICK.name, QUICK.content.decode(), {})
    bid = bisections.create(
        store, candidates=cands, owner=owner_id(), repo_path=str(hist.path.resolve()),
        good_ref="good", bad_ref="bad", good_sha=cands[0], bad_sha=cands[-1],
        oracle_name=QUICK.name, oracle_sha256=QUICK.sha256, polarity=Polarity.FAILURE.value,
        env_fingerprint="env0", environment={}, settings={}, notes=[])
    art = ArtifactStore(store).save(NewArtifact("quick", cands[1], ArtifactKind.SOURCE,
                                                ArtifactStatus.OK, {}))
    for pos in range(1, runs + 1):
        run_id = run_store.save_run(
            store, run_store.Key(QUICK.sha256, "env0"),
            NewRun(cands[pos], Outcome.PASS, "r", True, datetime.now(UTC), duration_s=seconds,
                   artifact_id=art.id))
        run_store.add_probe(store, bid, owner_id(), position=pos, commit_sha=cands[pos],
                            run_id=run_id, verdict="good", round_=1)


def _plan(db: Path, hist: SyntheticHistory, *args: str) -> tuple[str, str]:
    r = invoke("--db", str(db), "plan", "--repo", str(hist.path), "--good", hist.main[0],
               "--bad", hist.main[-1], "--profile", "torchlet", *args)
    assert r.exit_code == 0, r.stderr
    return r.stdout, r.stderr


def test_an_oracle_never_run_is_priced_by_its_kind_not_by_other_oracles(
        home: Path, world: SyntheticHistory) -> None:
    db = home / "b.db"
    _quick_runs(db, world, seconds=0.5, runs=6)
    out, err = _plan(db, world, "--oracle", "torchlet_norm")
    # torchlet's default oracle run (5 s), never the 0.5 s of QUICK's runs here.
    assert ("no runs of this oracle yet: priced at 5 s a run from the default for torchlet "
            "projects; other oracles' runs never price it (--cost oracle=SECONDS sets it)"
            in " ".join(err.split())), err
    assert "oracle       5.0 s  default for torchlet projects" in out, out
    assert "oracle runs on this repository" not in out + err
    # A plain oracle's plan names no pairs and no performance.
    assert "pair" not in out + err and "performance" not in out + err, err
    assert "culprit, parent and revert run 1 time(s) each" in " ".join(err.split())

    # The oracle that ran is priced by its own runs, and no note says otherwise.
    out, err = _plan(db, world, "--oracle", str(_file(home, QUICK)))
    assert "oracle       0.5 s  measured over 6 runs of this oracle" in out, out
    assert "no runs of this oracle yet" not in err

    # --cost over both: no note either.
    data = json.loads(_plan(db, world, "--oracle", "torchlet_norm", "--cost", "oracle=30",
                            "--json")[0])
    assert data["costs"]["oracle"] == 30 and data["cost_sources"]["oracle"] == {"from": "--cost"}
    assert not any("no runs of this oracle yet" in n for n in data["notes"])


def test_a_performance_oracles_plan_names_its_pairs(home: Path,
                                                    world: SyntheticHistory) -> None:
    _, err = _plan(home / "b.db", world, "--threshold", "5%", "--", "python", "bench.py")
    flat = " ".join(err.split())
    assert "performance oracle, paired" in flat
    assert "the culprit paired about 2 times beside its parent" in flat
    assert "no runs of this oracle yet: priced at 5 s a run" in flat


def _file(home: Path, oracle: Oracle) -> Path:
    """``oracle``'s bytes as a file ``--oracle`` takes (the same bytes: the same identity)."""
    path = home / oracle.path.name
    path.write_bytes(oracle.content)
    return path


def _report(hist: SyntheticHistory) -> dict[str, object]:
    """A HUD report of one TorchBench speedup series of two models: main[10]..main[14]."""
    def point(i: int, flag: bool) -> dict[str, object]:
        return {"commit": hist.main[i], "value": 0.5 if flag else 1.0, "flag": flag}

    def result(model: str) -> dict[str, object]:
        return {"group_info": {"suite": "torchbench", "model": model, "metric": "speedup",
                               "dtype": "bfloat16", "mode": "inference"},
                "baseline_point": point(6, False),
                "points": [point(10, False), point(14, True), point(18, True)],
                "label": "regression",
                "policy": {"condition": "greater_equal", "threshold": 0.95}}

    return {"report_id": "two_models",
            "report": {"results": [result("BERT_pytorch"), result("resnet50")]}}


def test_a_dashboard_reports_benchmark_is_priced_by_its_models(
        home: Path, world: SyntheticHistory) -> None:
    """2 models, 3 rounds a run, 120 s a model's run (defaults.BENCHMARK_MODEL_RUN_S): 12 min
    a run, not the 0.5 s of another oracle's runs on this repository."""
    db = home / "b.db"
    _quick_runs(db, world, seconds=0.5, runs=6)
    report = home / "report.json"
    report.write_text(json.dumps(_report(world)))
    r = invoke("--db", str(db), "plan", "--repo", str(world.path), "--profile", "torchlet",
               "--offline", "--from-report", str(report))
    assert r.exit_code == 0, r.stderr
    flat = " ".join(r.stderr.split())
    assert ("no runs of this oracle yet: priced at 12 min a run from the default for "
            "PyTorch's benchmark of 2 model(s), 3 round(s) a run, 2 min a model's run") in flat
    assert "oracle      12 min  default for PyTorch's benchmark of 2 model(s)" in r.stdout
    assert "performance oracle, paired" in flat
