"""Run by bisector once in the culprit's environment: ``python -m torch.utils.collect_env``,
the block PyTorch's issue template asks for, made by the probed torch itself.

collect_env lists packages with ``python -m pip list``; an environment uv made has no pip,
so where that comes back empty the same patterns are matched against the environment's
installed distributions instead (importlib.metadata reads what pip would list).

Standard library and the probed torch only. It prints the block, then one
``BISECTOR_RESULT {"collect_env": TEXT}`` line bisector keeps (redacted when shown); a torch
whose collect_env cannot run exits 125 saying why, and the report falls back to the facts
recorded at the probe.
"""

from __future__ import annotations

import json
import sys
from importlib import metadata
from typing import Any


def _distributions(ce: Any) -> str:
    patterns = [p for name in ("PIP_PATTERNS", "COMMON_PATTERNS", "NVIDIA_PATTERNS")
                for p in getattr(ce, name, [])] or ["torch", "numpy", "triton", "nvidia"]
    found = set()
    for dist in metadata.distributions():
        name = str(dist.metadata["Name"] or "")
        line = f"{name}=={dist.version}"
        if name and any(p in line for p in patterns):
            found.add(line)
    return "\n".join(sorted(found, key=str.lower))


def main() -> int:
    try:
        from torch.utils import collect_env as ce  # type: ignore[import-not-found]

        info = ce.get_env_info()
        if not getattr(info, "pip_packages", None) and hasattr(info, "_replace"):
            info = info._replace(pip_version="pip3", pip_packages=_distributions(ce))
        text = str(ce.pretty_str(info))
    except Exception as e:  # any failure: said, and the facts stand in
        print(f"torch.utils.collect_env could not run here: {type(e).__name__}: {e}")
        return 125
    print(text)
    print("BISECTOR_RESULT " + json.dumps({"collect_env": text}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
