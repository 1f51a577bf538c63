#!/usr/bin/env bash
# Issue 10's GPU-box proof (SQLite, no network, no Docker): the nightly watch ticks against the
# installed torch and then against it with the #170398 fix as two consecutive "nightlies"; the
# flip starts its find-fix bisection. STEPS="setup shipped flip" (default: all three), HARMLESS=N
# (default 8). Outputs under $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${WORKDIR:-/tmp/issue10}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | grep -v "already exists" | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi -L
for step in ${STEPS:-setup shipped flip}; do
  [ "$step" = setup ] && rm -rf "$WORK" && mkdir -p "$WORK"
  start=$(date +%s)
  python3 proofs/issue10_proof.py "$step" --workdir "$WORK" --harmless "${HARMLESS:-8}" \
    2>&1 | tee "$OUT/issue10_$step.log" | tail -c 6000
  echo "== $step: $(( $(date +%s) - start ))s"
done
for f in issue10_proof.json bisector.toml last-event.json; do
  [ -f "$WORK/$f" ] && cp "$WORK/$f" "$OUT/"
done
cp -r "$WORK/events" "$OUT/events" 2>/dev/null || true
ls "$WORK/home/data/reports" 2>/dev/null && cp "$WORK"/home/data/reports/*.md "$OUT/" 2>/dev/null
exit 0
