"""``make bench``: a GPU probe against its oracle, from the recorded H100 proof.

No GPU here, so the figures are read from ``oracles/proof/2026-11-25-probe-overhead/``,
``...-kept-bytecode/`` and ``2026-11-27-probe-overhead-head/`` (made by
``proofs/probe_overhead_proof.sh`` on the lent box): the same compile-heavy oracle run
directly with the python of an environment bisector made (the baseline, same box, same call),
and each probe of the overlay proof history before and after the change, from ``show --json``.
Printed as ratios and differences against that baseline, as every bench section does.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

PROOFS = Path(__file__).resolve().parent.parent / "oracles" / "proof"
PROOF = PROOFS / "2026-11-25-probe-overhead"
# The same proof after the run's bytecode moved to one kept folder (executors/bytecode.py) and
# the reaper stopped polling: another H100, its own baseline from the same call.
KEPT = PROOFS / "2026-11-25-probe-overhead-kept-bytecode"
# Again at the code of 2026-11-27, every executor change since included: a third H100.
HEAD = PROOFS / "2026-11-27-probe-overhead-head"


def _probes(proof: Path, name: str) -> list[dict[str, Any]]:
    data = json.loads((proof / name).read_text())
    return [p for p in data["probes"] if not p["reused"] and p["exit_code"] is not None]


def bench_gpu_overhead(line: Any) -> None:
    print("10. a GPU probe vs its oracle run directly (H100 proofs, recorded: "
          f"{PROOF.relative_to(PROOF.parents[2])}, {KEPT.name}, {HEAD.name})")
    for proof, runs in ((PROOF, (("before (23f6b2d)", "show_old.json"),
                                 ("after", "show_new.json"))),
                        (KEPT, (("kept bytecode folder", "show_new.json"),)),
                        (HEAD, (("2026-11-27 code", "show_new.json"),))):
        if not (proof / "baseline.json").exists():
            print(f"  (the files of {proof.name} are missing: run "
                  "proofs/probe_overhead_proof.sh)")
            continue
        base = json.loads((proof / "baseline.json").read_text())
        direct = statistics.median(base["runs"]["env_direct"])
        line(f"{proof.name}: oracle run directly, the environment's python (median)",
             f"{direct:.1f}s")
        for label, name in runs:
            probes = _probes(proof, name)
            wall = statistics.mean(p["facts"]["probe_s"] for p in probes)
            over = [p["facts"]["probe_s"] - p["duration_s"] for p in probes]
            line(f"{label}: probe wall (mean of {len(probes)})",
                 f"{wall:.1f}s = {wall / direct:.2f}x direct, direct {wall - direct:+.1f}s "
                 f"(target: <= direct + 3s)")
            line(f"{label}: probe - its oracle (mean, max)",
                 f"{statistics.mean(over):.1f}s, {max(over):.1f}s")
        phases: dict[str, list[float]] = {}
        for p in _probes(proof, runs[-1][1]):
            for k, v in (p.get("phases") or p["facts"].get("phases") or {}).items():
                phases.setdefault(k, []).append(float(v))
        if phases:
            line(f"{runs[-1][0]}: phases (mean s)",
                 ", ".join(f"{k} {statistics.mean(v):.1f}" for k, v in phases.items()))
