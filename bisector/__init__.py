"""bisector: find the commit that broke PyTorch (or any Python project with a git history)."""

import os

__version__ = "0.1.0"

# Every git this process runs, GitPython's included, reads a commit's own objects: git would
# otherwise honour ``refs/replace/*`` (from a user's clone, or fetched by a mirror) and hand
# back another commit's tree under the probed sha, which would then be built, cached and
# judged under that sha. Set here, before any git runs, so no call can forget it; oracles and
# builds inherit it too. ``artifacts/export.verified_tree`` checks each exported commit anyway.
os.environ["GIT_NO_REPLACE_OBJECTS"] = "1"
