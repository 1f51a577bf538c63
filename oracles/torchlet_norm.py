# /// script
# dependencies = []
# [tool.bisector]
# description = "Demo: torchlet.norm([3, 4]) must be 5 (the planted regression breaks it)"
# timeout = 60
# ///
"""Demo oracle for the synthetic torchlet history: checks torchlet.norm against a known value.

It goes through the compiled ``_C.dot`` kernel, so it also fails when the regression is planted
in C instead of Python.
"""

import sys

try:
    import torchlet
except ImportError as e:  # no torchlet here: this environment cannot answer
    print(f"skip: {e}")
    sys.exit(125)

value = torchlet.norm([3.0, 4.0])
print(f"torchlet {torchlet.__version__} (git {torchlet.git_version[:12]}): norm([3, 4]) = {value}")
sys.exit(0 if abs(value - 5.0) < 1e-9 else 1)
