"""Build once, overlay many: with no prebuilt wheel at all, a commit built from source is the
overlay base of its Python-only neighbours, so a Python regression costs a build per stretch of
C changes, not one per probe."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import select

from bisector.app.demo.torchlet import generate
from bisector.store import models as m
from bisector.store.db import open_store
from tests.support import run_cli


def test_a_python_culprit_costs_a_build_per_c_stretch_not_per_probe(home: Path,
                                                                     tmp_path: Path) -> None:
    hist = generate(tmp_path / "t", commits=64, culprit=41, broken=(), seed=6121,
                    release_at=None, side_branch_at=None, c_churn=(20, 52))
    plan = run_cli("plan", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                   hist.main[-1], "--oracle", "torchlet_norm", "--no-confirm", "--json")
    assert plan.returncode == 0, plan.stderr
    projected = json.loads(plan.stdout)
    r = run_cli("start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
                hist.main[-1], "--oracle", "torchlet_norm", "--no-confirm", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["culprit"]["sha"] == hist.culprit
    with open_store(str(home / "data" / "bisector.db"), create=False).session() as s:
        arts = list(s.scalars(select(m.Artifact)))
        sources = [a for a in arts if a.kind == "source"]
        overlays = [a for a in arts if a.kind == "overlay"]
        on_builds = [a for a in overlays if str(a.settings["base_desc"]).startswith("source")]
    probes = int(d["oracle_runs"])
    # Overlays of commits the search only might have probed next (made while an oracle ran,
    # run/prefetch.py) stay in the cache; the probed ones are counted.
    probed = {p["sha"] for p in d["probes"] if not p["reused"]}
    overlays = [a for a in overlays if a.commit_sha in probed]
    # Three stretches without a C change (0-19, 20-51, 52-63): at most one build each, and the
    # other probes are overlays on those builds.
    print(f"probes {probes}, source builds {len(sources)}, overlays {len(overlays)}, "
          f"on builds {len(on_builds)}; plan {projected['builds_mean']:.2f} builds mean")
    assert len(sources) <= 3 < probes, (len(sources), probes)
    assert on_builds and len(sources) + len(overlays) == probes
    # The plan projected the same reuse: fewer builds than probes.
    assert projected["builds_max"] <= 3 < projected["probes_max"]
