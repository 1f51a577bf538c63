# Where the time before the first probe goes on the GPU box: `bisect plan` of the prefetch
# proof history (proofs/prefetch_proof.py, made in /tmp/prefetch) under cProfile, its index
# served on 127.0.0.1. It showed the test index hashing and reading GB wheels per request.
export PYTHONPATH=$PWD:/tmp/site PATH=/tmp/site/bin:$PATH BISECTOR_HOME=/tmp/prefetch/home-prof
rm -rf $BISECTOR_HOME
python3 - <<'PY'
import cProfile, pstats, subprocess, sys, time, io
from pathlib import Path
from bisector.app.demo.index import IndexServer
with IndexServer(Path("/tmp/prefetch/index")) as s:
    url = s.index_url("nightly-cu130")
    args = ["--repo", "/tmp/prefetch/repo", "--good", "fixed", "--bad", "main", "--oracle", "name_mangling",
            "--profile", "pytorch", "--python", "python3", "--nightly-index", url, "--variant", "cu130",
            "--release-index", ""]
    t = time.time()
    r = subprocess.run([sys.executable, "-m", "cProfile", "-o", "/tmp/plan.prof", "-m", "bisector", "plan", *args],
                       capture_output=True, text=True)
    print("plan wall", round(time.time() - t, 1), "rc", r.returncode, r.stderr[-500:])
    st = pstats.Stats("/tmp/plan.prof"); out = io.StringIO(); st.stream = out
    st.sort_stats("cumulative").print_stats(45); print(out.getvalue()[:9000])
PY
