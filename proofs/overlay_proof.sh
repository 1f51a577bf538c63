#!/usr/bin/env bash
# Issue 4's GPU proof on the lent box (torch + triton installed, no network): bisector's pure
# Python deps from carried wheels, then proofs/overlay_proof.py on the installed torch.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD BISECTOR_HOME=/tmp/bisector-home
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .carry/wheels \
  gitpython click sqlalchemy alembic rich platformdirs packaging uv httpx docker cattrs croniter \
  2>&1 | tail -2
nvidia-smi -L; git --version
python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__)'
start=$(date +%s)
python3 proofs/overlay_proof.py --package torch --workdir /tmp/proof --python python3 \
  --harmless "${HARMLESS:-60}" --json "$OUT/overlay_proof.json"
rc=$?
echo "== overlay proof rc=$rc in $(( $(date +%s) - start ))s"
python3 -m bisector --db /tmp/proof/bisector.db show 1 > "$OUT/overlay_proof_show.md" 2>&1
tail -30 "$OUT/overlay_proof_show.md"
exit $rc
