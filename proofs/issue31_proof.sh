#!/usr/bin/env bash
# Issue 31's GPU-box proof of item 1 (torch + triton installed, no network, no Docker): a
# performance bisection decided by paired runs while a load of our own making shares the GPU
# part of the time (proofs/issue31_proof.py). HARMLESS=N (default 2), ON/OFF seconds of the
# load (default 40/40). JSON, start output, report and issue under $OUT.
set -u
export PYTHONUNBUFFERED=1 BISECTOR_HOME=/tmp/bisector-home-issue31
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
rm -rf "$BISECTOR_HOME" /tmp/issue31
# bisector's dependencies the box lacks travel as wheels in .carry/wheels (the box has click,
# httpx, rich, packaging, jinja2, markupsafe, numpy, scipy, attrs, requests, python-dateutil).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | grep -v "already exists" | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi -L
python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__, torch.cuda.device_count())'
start=$(date +%s)
python3 proofs/issue31_proof.py --workdir /tmp/issue31 --python python3 \
  --harmless "${HARMLESS:-2}" --on "${ON:-40}" --off "${OFF:-40}" --json "$OUT/issue31_proof.json" \
  > /dev/null 2> "$OUT/issue31_proof.err"
rc=$?
echo "== issue 31 proof rc=$rc in $(( $(date +%s) - start ))s"
d=/tmp/issue31/perf-gpu
cp "$d/start.json" "$OUT/issue31_start.json" 2>/dev/null
tail -c 300000 "$d/start.stderr" > "$OUT/issue31_start.stderr" 2>/dev/null
cp /tmp/issue31/issue12_perf-gpu_issue.md "$OUT/issue31_issue.md" 2>/dev/null
python3 -m bisector --db "$d/bisector.db" show 1 > "$OUT/issue31_show.md" 2>&1
tail -c 2500 "$OUT/issue31_proof.err"
python3 - "$OUT/issue31_proof.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print({k: d.get(k) for k in ("ok", "state", "culprit", "expected_culprit", "probes", "oracle_runs", "bisect_wall_seconds")})
pf = d.get("perf") or {}
print("reference", pf.get("reference"), "compared", pf.get("compared"))
for row in pf.get("commits", []):
    print(row["position"], row["verdict"], row["pairs"], row["median"], row["change"], row["p_value"])
c = d.get("confirmation") or {}
print("confirmation", c.get("status"), c.get("judged_by"), c.get("pairs"), c.get("change"), c.get("p_value"), (c.get("revert") or {}).get("verdict"))
print("load spans", d.get("load"))
PY
exit $rc
