"""Runs inside a probed environment and prints the facts a verdict is recorded with, as JSON.

Standalone on purpose (no bisector import): it is executed by the environment's own Python, which
has torch (or the profile's package) installed but not bisector. Every lookup is guarded; a fact
that cannot be read is left out, never an error.
"""

import importlib
import json
import os
import platform
import sys


def main() -> None:
    facts: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    mod_name = sys.argv[1] if len(sys.argv) > 1 else ""
    if mod_name:
        # Which package was asked for, also when it does not import: a failing oracle whose
        # output says the same import failed is judged a skip, not bad (run/pipeline.py).
        facts["probed"] = mod_name
        try:
            mod = __import__(mod_name)
            facts["package"] = mod_name
            facts["package_version"] = str(getattr(mod, "__version__", ""))
            ver = getattr(mod, "version", None)
            facts["git_version"] = str(
                getattr(ver, "git_version", getattr(mod, "git_version", ""))
            )
        except Exception as e:
            facts["package_error"] = f"{type(e).__name__}: {e}"[:500]
    try:
        torch = importlib.import_module("torch")

        facts["torch"] = torch.__version__
        facts["torch_git_version"] = torch.version.git_version
        facts["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            facts["gpu"] = torch.cuda.get_device_name()
            facts["gpu_capability"] = ".".join(map(str, torch.cuda.get_device_capability()))
            facts["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    try:
        triton = importlib.import_module("triton")

        facts["triton"] = triton.__version__
    except Exception:
        pass
    facts["env"] = {
        k: v for k, v in os.environ.items()
        if k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE_", "TORCH_LOGS", "CUDA_VISIBLE_DEVICES"))
    }
    print(json.dumps(facts, sort_keys=True))


if __name__ == "__main__":
    main()
