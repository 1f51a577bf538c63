#!/usr/bin/env bash
# GPU-box proof of the prefetch (proofs/prefetch_proof.py): MODE=off|on, the overlay proof
# history over torch-sized nightlies on a throttled 127.0.0.1 index (WHEEL_S seconds a wheel).
# The history and wheels are made once in /tmp/prefetch (kept while the box stays warm).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | grep -v "already exists" | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi -L
start=$(date +%s)
python3 proofs/prefetch_proof.py --workdir /tmp/prefetch --python python3 --mode "${MODE:-off}" \
  --harmless "${HARMLESS:-8}" --every "${EVERY:-4}" --wheel-s "${WHEEL_S:-15}" \
  --json "$OUT/prefetch_${MODE:-off}.json" > /dev/null 2> "$OUT/prefetch_${MODE:-off}.err"
echo "== prefetch proof ${MODE:-off} rc=$? in $(( $(date +%s) - start ))s"
cp /tmp/prefetch/show-"${MODE:-off}".md /tmp/prefetch/setup.json "$OUT/" 2>/dev/null
tail -c 200000 /tmp/prefetch/start-"${MODE:-off}".err > "$OUT/start_${MODE:-off}.err" 2>/dev/null
tail -c 1500 "$OUT/prefetch_${MODE:-off}.err"
python3 - "$OUT/prefetch_${MODE:-off}.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
keys = ("mode", "right", "wall_s", "oracle_runs", "oracle_s", "first_obtain_s", "ratio",
        "made_ahead_s", "before_first_probe_s", "after_last_probe_s", "candidates", "wheel_bytes", "setup_s")
print({k: d.get(k) for k in keys})
for p in d.get("probes", []):
    print(" ", p["sha"], p["verdict"], p["artifact"], p["phases"], p["ahead"])
PY
