#!/usr/bin/env bash
# Issue 9's GPU proof on the lent two-GPU box (torch + triton installed, no network): the
# overlay proof history bisected cold with --jobs 1, then with --jobs 2 --gpus 0,1.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .carry/wheels \
  gitpython click sqlalchemy alembic rich platformdirs packaging uv httpx docker cattrs 2>&1 | tail -2
nvidia-smi -L; git --version
python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__, torch.cuda.device_count())'
start=$(date +%s)
python3 proofs/overlay_proof.py --package torch --workdir /tmp/proof --python python3 \
  --harmless "${HARMLESS:-60}" --compare-gpus 0,1 --json "$OUT/overlay_proof_2gpu.json"
rc=$?
echo "== two-GPU overlay proof rc=$rc in $(( $(date +%s) - start ))s"
for j in 1 2; do
  BISECTOR_HOME=/tmp/proof/home-jobs$j python3 -m bisector --db /tmp/proof/bisector-jobs$j.db \
    show 1 > "$OUT/overlay_proof_jobs${j}_show.md" 2>&1
  grep -E "^- (Probes|Range)|GPU" "$OUT/overlay_proof_jobs${j}_show.md" | head -30
done
exit $rc
