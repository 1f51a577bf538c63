#!/usr/bin/env bash
# Issue 33's GPU-box proof: a worker's offer read from the real nvidia-smi, and which
# bisections' probe queues it serves (proofs/issue33_offer.py). GitPython travels as wheels in
# .carry/wheels (pip download gitpython gitdb smmap).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site33 \
  .carry/wheels/*.whl 2>&1 | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site33
nvidia-smi -L
nvidia-smi | head -4
python3 proofs/issue33_offer.py | tee "$OUT/issue33_offer.json"
