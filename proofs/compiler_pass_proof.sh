#!/usr/bin/env bash
# Issue 35's GPU-box proof of item 2 (torch + triton installed, no network, no Docker): a planted
# inductor lowering bug and a planted post-grad pass bug, each bisected on a history made from
# the installed torch's Python tree (every probe an overlay), then torch's compiler bisector at
# the culprit (proofs/compiler_pass_proof.py). WHICH=lowering|post-grad|both, HARMLESS=N.
# JSON, start outputs, show and issue reports under $OUT.
set -u
export PYTHONUNBUFFERED=1 BISECTOR_HOME=${BISECTOR_HOME:-/tmp/bisector-home-issue35}
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${WORKDIR:-/tmp/issue35}
rm -rf "$BISECTOR_HOME" "$WORK"
[ -n "${SKIP_INSTALL:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site \
  .carry/wheels/*.whl 2>&1 | grep -v "already exists" | tail -2 || true
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH
nvidia-smi -L
python3 -c 'import torch, triton; print(torch.__version__, torch.version.git_version, triton.__version__, torch.cuda.device_count())'
start=$(date +%s)
python3 proofs/compiler_pass_proof.py --workdir "$WORK" --python python3 \
  --harmless "${HARMLESS:-6}" --which "${WHICH:-both}" --json "$OUT/compiler_pass_proof.json" \
  2> "$OUT/compiler_pass_proof.err"
rc=$?
echo "== issue 35 compiler-pass proof rc=$rc in $(( $(date +%s) - start ))s"
grep "^== " "$OUT/compiler_pass_proof.err"
for c in lowering post-grad; do
  d="$WORK/$c"
  [ -f "$d/start.json" ] && cp "$d/start.json" "$OUT/${c}_start.json"
  [ -f "$d/start.stderr" ] && tail -c 100000 "$d/start.stderr" > "$OUT/${c}_start.stderr"
  [ -f "$WORK/issue12_${c}_issue.md" ] && cp "$WORK/issue12_${c}_issue.md" "$OUT/${c}_issue.md"
  [ -f "$d/bisector.db" ] && python3 -m bisector --db "$d/bisector.db" show 1 > "$OUT/${c}_show.md" 2>&1
done
python3 - "$OUT/compiler_pass_proof.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k, v in d.items():
    if not isinstance(v, dict):
        continue
    c = v.get("compiler_bisector") or {}
    print(k, {x: v.get(x) for x in ("ok", "state", "culprit", "expected_culprit", "probes", "oracle_runs", "source_builds", "bisect_wall_seconds")})
    print("  compiler bisector:", {x: c.get(x) for x in ("available", "torch", "runs", "seconds", "found", "error")})
    print("  collect_env:", v.get("environment_report"), v.get("collect_env_head", [])[:3])
PY
exit $rc
