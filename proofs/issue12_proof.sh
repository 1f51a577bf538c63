#!/usr/bin/env bash
# Issue 12's GPU-box proof (torch + triton installed, no network, no Docker): a flaky oracle
# (pytorch#147170 planted in source_matcher_utils.py) and a performance oracle (a busy-wait
# planted in F.softmax), each bisected on a history made from the installed torch's Python tree,
# every probe an overlay on the installed torch. WHICH=flaky|perf|both (default both),
# HARMLESS=N (default 20). JSON, start outputs and issue reports under $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD BISECTOR_HOME=/tmp/bisector-home-issue12
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${WORKDIR:-/tmp/issue12}
# bisector's dependencies the box lacks travel as wheels in .carry/wheels (the box has click,
# httpx, rich, packaging, jinja2, markupsafe, numpy and scipy already).
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site
nvidia-smi -L; git --version
python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__, torch.cuda.device_count())'
python3 -c 'import scipy; print("scipy", scipy.__version__)' || echo "scipy missing: the performance mode needs it"
start=$(date +%s)
python3 proofs/issue12_proof.py --workdir "$WORK" --python python3 \
  --harmless "${HARMLESS:-20}" --which "${WHICH:-both}" --json "$OUT/issue12_proof.json"
rc=$?
echo "== issue 12 proof rc=$rc in $(( $(date +%s) - start ))s"
for c in flaky perf; do
  [ -f "$WORK/issue12_${c}_issue.md" ] && cp "$WORK/issue12_${c}_issue.md" "$OUT/"
  [ -f "$WORK/$c/start.json" ] && cp "$WORK/$c/start.json" "$OUT/issue12_${c}_start.json"
  [ -f "$WORK/$c/start.stderr" ] && tail -c 200000 "$WORK/$c/start.stderr" > "$OUT/issue12_${c}_start.stderr"
  [ -f "$WORK/$c/bisector.db" ] && python3 -m bisector --db "$WORK/$c/bisector.db" show 1 \
    > "$OUT/issue12_${c}_show.md" 2>&1 && tail -25 "$OUT/issue12_${c}_show.md"
done
exit $rc
