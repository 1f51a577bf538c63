"""Prints the facts a verdict is recorded with, as JSON, from inside a probed environment.

Standalone on purpose (no bisector import): it is executed by the environment's own Python, which
has torch (or the profile's package) installed but not bisector. Every lookup is guarded; a fact
that cannot be read is left out, never an error.

Two ways to run it:

- as a script (``python facts_probe.py PACKAGE``): imports the package and prints its facts. A
  torch import costs seconds, so this is the fallback;
- as a hook (the local executor copies this file into an environment's site-packages as
  ``_bisector_facts.py`` with a ``.pth`` line that imports it): a Python started with
  ``BISECTOR_FACTS_DIR`` set writes, when it exits, the facts of what *it* imported, without
  importing anything new (a GPU's name only if it already initialised CUDA). The oracle's own
  run then reports its environment, and a probe pays no second torch import (issue 21).
"""

import os
import sys

# Nothing else at the top: as the hook this module is imported by every start of the
# environment's Python, so what it needs is imported when it is used.

DIR_VAR = "BISECTOR_FACTS_DIR"
PACKAGE_VAR = "BISECTOR_FACTS_PACKAGE"


def _loaded(name: str, load: bool) -> object:
    """The module ``name``: imported now when ``load``, else only if this process has it."""
    if load:
        import importlib

        return importlib.import_module(name)
    mod = sys.modules.get(name)
    if mod is None:
        raise ImportError(f"{name} was not imported")
    return mod


def gather(mod_name: str, load: bool = True) -> dict[str, object]:
    """The facts of ``mod_name``, torch and triton; ``load=False`` (the hook) only reads what
    is already imported and asks CUDA only if it is initialised."""
    import platform

    facts: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
    }
    if mod_name and (load or mod_name in sys.modules):
        # Which package was asked for, also when it does not import: a failing oracle whose
        # output says the same import failed is judged a skip, not bad (run/pipeline.py).
        facts["probed"] = mod_name
        try:
            mod = _loaded(mod_name, load)
            facts["package"] = mod_name
            facts["package_version"] = str(getattr(mod, "__version__", ""))
            ver = getattr(mod, "version", None)
            facts["git_version"] = str(
                getattr(ver, "git_version", getattr(mod, "git_version", ""))
            )
        except Exception as e:
            facts["package_error"] = f"{type(e).__name__}: {e}"[:500]
    try:
        torch = _loaded("torch", load)

        facts["torch"] = torch.__version__  # type: ignore[attr-defined]
        facts["torch_git_version"] = torch.version.git_version  # type: ignore[attr-defined]
        facts["torch_cuda"] = torch.version.cuda  # type: ignore[attr-defined]
        cuda = torch.cuda  # type: ignore[attr-defined]
        if (cuda.is_available() if load else cuda.is_initialized()):
            facts["gpu"] = cuda.get_device_name()
            facts["gpu_capability"] = ".".join(map(str, cuda.get_device_capability()))
            facts["cudnn"] = torch.backends.cudnn.version()  # type: ignore[attr-defined]
    except Exception:
        pass
    try:
        triton = _loaded("triton", load)

        facts["triton"] = triton.__version__  # type: ignore[attr-defined]
    except Exception:
        pass
    facts["env"] = {
        k: v for k, v in os.environ.items()
        if k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE_", "TORCH_LOGS", "CUDA_VISIBLE_DEVICES"))
    }
    return facts


def _write_at_exit(folder: str, mod_name: str) -> None:
    """At this process's exit: its facts into ``folder/facts-PID.json``, if it imported the
    probed package (or torch), or always when no package is named (a project of the generic
    profile: its Python is the fact). Several processes may write (compile workers import
    torch too); the executor keeps the richest."""
    if mod_name and mod_name not in sys.modules and "torch" not in sys.modules:
        return
    try:
        import json

        facts = gather(mod_name, load=False)
        path = os.path.join(folder, f"facts-{os.getpid()}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(facts, f, sort_keys=True)
        os.replace(path + ".tmp", path)
    except Exception:
        pass  # a fact that cannot be read is left out; the executor falls back


def arm() -> None:
    """Run by the ``.pth`` line at every start of the environment's Python: nothing unless
    the executor asked for facts (``BISECTOR_FACTS_DIR``)."""
    folder = os.environ.get(DIR_VAR)
    if not folder or not os.path.isdir(folder):
        return
    import atexit

    atexit.register(_write_at_exit, folder, os.environ.get(PACKAGE_VAR, ""))


def main() -> None:
    import json

    print(json.dumps(gather(sys.argv[1] if len(sys.argv) > 1 else ""), sort_keys=True))


if __name__ == "__main__":
    main()
else:
    arm()
