#!/usr/bin/env bash
# Runs on the lent GPU box (torch + triton installed, no network): installs bisector's pure
# Python dependencies from carried wheels, then `bisect check --env system` with each shipped
# oracle, name_mangling also with graph partitions off and on a patched torch. JSON under $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD BISECTOR_HOME=/tmp/bisector-home
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .carry/wheels \
  gitpython click sqlalchemy alembic rich platformdirs packaging uv httpx docker cattrs croniter \
  2>&1 | tail -2
nvidia-smi -L; python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__)'
for o in name_mangling recompile_out_variant source_partitions_determinism perf_template; do
  start=$(date +%s)
  python3 -m bisector check --oracle "$o" --json > "$OUT/check_$o.json"
  echo "== $o: rc=$? in $(( $(date +%s) - start ))s"; python3 -c "import json,sys; d=json.load(open('$OUT/check_$o.json')); print(d['verdict'], d['reason']); print(d['output_tail'][-1500:])"
done
TORCHINDUCTOR_GRAPH_PARTITION=0 python3 -m bisector check --oracle name_mangling --json > "$OUT/check_name_mangling_no_partition.json"
echo "== name_mangling, TORCHINDUCTOR_GRAPH_PARTITION=0: rc=$?"
py=$(python3 proofs/make_patched_torch.py /tmp/patched-torch)
python3 -m bisector check --oracle name_mangling --python "$py" --json > "$OUT/check_name_mangling_patched.json"
echo "== name_mangling on patched torch ($py): rc=$?"
for f in no_partition patched; do python3 -c "import json; d=json.load(open('$OUT/check_name_mangling_$f.json')); print('$f', d['verdict'], d['reason']); print(d['output_tail'][-800:])"; done
