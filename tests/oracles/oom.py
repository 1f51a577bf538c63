# /// script
# [tool.bisector]
# timeout = 120
# ///
"""Allocates far past any small memory limit: in a container it must be OOM-killed (a skip)."""
import sys

blocks = []
for _ in range(64):
    blocks.append(bytearray(64 * 2**20))  # touches the pages: 4 GiB in all
sys.exit(1)  # reached only without a memory limit; would be a wrong "bad"
