#!/usr/bin/env bash
# GPU proof of issue 20 (class 9: the interpreter that has torch; class 4: an overlay's torch
# names its own commit) and issue 23 (the overlay proof history bisected with and without the
# prior) on the lent box (torch + triton installed, no network). Outputs under $OUT.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD BISECTOR_HOME=/tmp/bisector-home
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --find-links .carry/wheels gitpython click sqlalchemy \
  alembic rich platformdirs packaging uv httpx docker cattrs starlette jinja2 uvicorn scipy \
  croniter 2>&1 | tail -2
nvidia-smi -L; git --version
echo "== python3 on PATH:"; which -a python3
python3 -c 'import sys, torch, triton; print(sys.executable, torch.__version__, torch.version.git_version, triton.__version__)'
REPO=$PWD

if [ -z "${SKIP9:-}" ]; then
echo "== class 9: bisect check --env system from a folder holding a torch/ package of its own"
git init -q /tmp/proj; mkdir -p /tmp/proj/torch && echo 'raise ImportError("the source tree, not a torch")' > /tmp/proj/torch/__init__.py
(cd /tmp/proj && python3 -m bisector check --oracle name_mangling --env system --json \
  > "$OUT/class9_check_system.json" 2> "$OUT/class9_check_system.err"; echo "rc=$?")
grep -i "python" "$OUT/class9_check_system.err" | head -3
python3 -c "import json; d=json.load(open('$OUT/class9_check_system.json')); print('verdict:', d['verdict'], '|', d['reason']); print('python:', d.get('facts', {}).get('python'), 'torch', d.get('facts', {}).get('torch'))"
for sys_py in /usr/bin/python3 /usr/local/bin/python3; do
  if [ -x "$sys_py" ] && ! "$sys_py" -c 'import torch' 2>/dev/null; then
    echo "== class 9: an interpreter without torch ($sys_py): a skip saying so, never bad"
    (cd /tmp && python3 -m bisector check --oracle name_mangling --env system --python "$sys_py" \
      --json > "$OUT/class9_no_torch.json" 2> "$OUT/class9_no_torch.err"; echo "rc=$?")
    python3 -c "import json; d=json.load(open('$OUT/class9_no_torch.json')); print('verdict:', d['verdict'], '|', d['reason'])"
    tail -2 "$OUT/class9_no_torch.err"
    break
  fi
done

fi
echo "== issue 23 + class 4: the overlay proof history, --prior none then --prior auto"
start=$(date +%s)
python3 proofs/overlay_proof.py --package torch --workdir /tmp/proof --python python3 \
  --harmless "${HARMLESS:-30}" --compare-prior "${PRIOR:-both}" --json "$OUT/prior_proof.json" > /dev/null 2> "$OUT/prior_proof.err"
rc=$?
echo "== prior proof rc=$rc in $(( $(date +%s) - start ))s"
python3 - "$OUT/prior_proof.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("ok:", d.get("ok"))
for k in ("prior_none", "prior_auto"):
    r = d.get(k, {})
    print(k, "probes:", r.get("probes"), "wall:", r.get("bisect_wall_seconds"), "s",
          "culprit ok:", (r.get("culprit") or {}).get("sha") == r.get("expected_culprit"),
          "source builds:", r.get("source_builds"))
    print("  prior:", json.dumps(r.get("prior"))[:600])
    bad = [(s, gv) for s, gv, _ in r.get("git_versions", []) if gv and not str(gv).startswith(s[:7])]
    print("  git_version per probe:", r.get("git_versions"))
    print("  probes whose torch named another commit:", bad)
PY
tail -5 "$OUT/prior_proof.err"
for m in none auto; do [ -e /tmp/proof/bisector-$m.db ] && python3 -m bisector --db /tmp/proof/bisector-$m.db show 1 > "$OUT/prior_show_$m.md" 2>&1; done
exit $rc
