#!/usr/bin/env bash
# GPU proof of issue 22 item 5 on the lent box (torch + triton installed, no network, no Docker,
# SQLite): 12 "nightlies" of the installed torch's Python tree, one of them the first with a
# planted slowdown in torch.nn.functional.relu; a `bisect tick` per nightly finds the change
# point and the slowdown's bisection (overlays on the installed torch) names and confirms the
# planted commit. Needs bisector's wheels in .carry/wheels, ruptures' among them (the watch's
# change points). BUILDS, PER_BUILD, SLOW_BUILD, THRESHOLD override the defaults (12, 3, 6, the
# oracle's 10 %). Outputs under $OUT.
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .carry/wheels gitpython click sqlalchemy \
  alembic rich platformdirs packaging uv httpx docker cattrs jinja2 scipy croniter ruptures \
  2>&1 | grep -v "already" | tail -2
python3 -c "import ruptures, numpy, scipy, sqlalchemy" || {
  echo "error: bisector's dependencies are missing (ruptures' wheel in .carry/wheels?)"; exit 2; }
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, torch.version.git_version, torch.__file__)"
start=$(date +%s)
python3 proofs/perf_watch_proof.py --package torch --workdir /tmp/perf-watch --out "$OUT" \
  --builds "${BUILDS:-12}" --per-build "${PER_BUILD:-3}" --slow-build "${SLOW_BUILD:-6}" \
  ${THRESHOLD:+--threshold "$THRESHOLD"} 2>&1 | tee "$OUT/perf_watch_proof.log" | tail -c 8000
rc=${PIPESTATUS[0]}
echo "== perf watch proof rc=$rc in $(( $(date +%s) - start ))s"
exit "$rc"
