#!/usr/bin/env bash
# GPU proof of issue 21 item 1 (a probe costs its oracle) on the lent box (torch + triton, no
# network). MODE=baseline: the compile-heavy oracle run directly (the box's python, and the
# python of an environment bisector made), twice each. MODE=old|new: the overlay proof history
# bisected by bisector as it was before this change (.carry/old: `git archive` of the commit
# before) or as it is, then each probe's wall time against its oracle's, and its phases.
# Outputs under $OUT.
set -u
export PYTHONUNBUFFERED=1 BISECTOR_HOME=/tmp/bisector-home-${MODE:-new}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
# A machine still warm from an earlier call keeps its folders: start from nothing, so the
# bisection read below is this call's (bisection 1) and every cache is cold.
rm -rf "$BISECTOR_HOME" "/tmp/proof-${MODE:-new}"
# (the web server's wheels stay home: the carried tree is at most 64 MiB)
python3 -m pip install -q --no-index --find-links .carry/wheels gitpython click sqlalchemy \
  alembic rich platformdirs packaging uv httpx docker cattrs jinja2 scipy croniter 2>&1 | grep -v "already" | tail -2
nvidia-smi -L
case "${MODE:-new}" in
baseline)
  python3 proofs/overhead_proof.py --only "${ONLY:-direct,env_direct}" --repeat "${REPEAT:-2}" \
    --json "$OUT/baseline.json" | grep -E '^[a-z_]+ +[0-9]'
  exit 0 ;;
old) ROOT=.carry/old ;;
*) ROOT=. ;;
esac
start=$(date +%s)
# From its own folder: `python -m bisector` takes the package of the current folder first.
(cd "$ROOT" && python3 proofs/overlay_proof.py --package torch --workdir "/tmp/proof-$MODE" \
  --python python3 --harmless "${HARMLESS:-20}" --json "$OUT/proof_$MODE.json" \
  > /dev/null 2> "$OUT/proof_$MODE.err")
echo "== $MODE proof rc=$? in $(( $(date +%s) - start ))s"
PYTHONPATH=$PWD python3 -m bisector --db "/tmp/proof-$MODE/bisector.db" show 1 --json \
  > "$OUT/show_$MODE.json" 2>> "$OUT/proof_$MODE.err"
PYTHONPATH=$PWD python3 -m bisector --db "/tmp/proof-$MODE/bisector.db" show 1 \
  > "$OUT/show_$MODE.md" 2>> "$OUT/proof_$MODE.err"
python3 - "$OUT/show_$MODE.json" <<'PY'
import json, statistics, sys
d = json.load(open(sys.argv[1]))
ran = [p for p in d["probes"] if not p["reused"] and p["exit_code"] is not None]
print("culprit:", (d.get("culprit") or {}).get("sha", "")[:12], "probes run:", len(ran))
for p in ran:
    f = p["facts"]
    ph = f.get("phases") or {}
    print(f"  {p['sha'][:12]} {p['verdict']:4s} probe {f.get('probe_s', 0):6.1f}s "
          f"oracle {p['duration_s']:6.1f}s over {f.get('probe_s', 0) - p['duration_s']:5.1f}s "
          f"facts_from={f.get('facts_from', '-')} git={str(f.get('torch_git_version'))[:12]} "
          + " ".join(f"{k}={v:.1f}" for k, v in ph.items()))
over = [p["facts"].get("probe_s", 0) - p["duration_s"] for p in ran]
print(f"mean probe {statistics.mean(p['facts'].get('probe_s', 0) for p in ran):.1f}s, "
      f"mean oracle {statistics.mean(p['duration_s'] for p in ran):.1f}s, "
      f"mean probe-oracle {statistics.mean(over):.1f}s, max {max(over):.1f}s")
PY
tail -3 "$OUT/proof_$MODE.err"
