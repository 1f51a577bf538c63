"""A seed-style repro script: prints and exits 0 when the bug REPRODUCES (use --regress success)."""
import sys

import torchlet

if abs(torchlet.norm([3.0, 4.0]) - 5.0) > 1e-9:
    print("reproduced: norm([3, 4]) is wrong")
    sys.exit(0)
print("not reproduced")
sys.exit(1)
