# /// script
# [tool.bisector]
# timeout = 2
# ///
"""Hangs, and leaves a grandchild that hangs too: the timeout must kill both."""
import os
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.path.join(os.environ["BISECTOR_RUN_DIR"], "grandchild.pid"), "w") as f:
    f.write(str(child.pid))
time.sleep(600)
