"""Project profiles: everything project-specific about building and identifying a commit.

PyTorch is one profile; the synthetic torch-like project of the demo and tests is another, and
the generic profile builds any Python project that ``uv build`` can build. Keeping this as data
means the tests drive the same code paths that a PyTorch bisection does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from bisector.errors import UsageError


@dataclass(frozen=True)
class Profile:
    name: str
    distribution: str | None
    import_name: str | None
    version_file: str | None = None
    version_template: str | None = None
    base_version: str = "0.0.0"
    build_command: tuple[str, ...] = ("uv", "build", "--wheel", "--out-dir", "{out}", "{src}")
    build_env: dict[str, str] = field(default_factory=dict)
    marker_paths: tuple[str, ...] = ()

    def version_for(self, sha: str) -> str:
        """PEP 440 version of a source build, unique per commit like PyTorch's ``+git<sha>``."""
        return f"{self.base_version}+git{sha[:7]}"


VERSION_TEMPLATE = '__version__ = "{version}"\ngit_version = "{sha}"\n'

TORCHLET = Profile(
    name="torchlet",
    distribution="torchlet",
    import_name="torchlet",
    version_file="torchlet/version.py",
    version_template=VERSION_TEMPLATE,
    base_version="0.1.0a0",
    marker_paths=("torchlet/__init__.py", "csrc/_C.c"),
)

PYTORCH = Profile(
    name="pytorch",
    distribution="torch",
    import_name="torch",
    # PyTorch's setup.py writes torch/version.py itself from the git sha; in an exported tree
    # there is no .git, so the sha comes in through the environment, as CI does it.
    build_command=("python", "setup.py", "bdist_wheel", "--dist-dir", "{out}"),
    build_env={
        "PYTORCH_BUILD_VERSION": "{version}",
        "PYTORCH_BUILD_NUMBER": "0",
        "BUILD_TEST": "0",
        "USE_DISTRIBUTED": "0",
        "USE_CCACHE": "1",
    },
    base_version="2.0.0a0",
    marker_paths=("torch/__init__.py", "aten/src/ATen", "c10"),
)

GENERIC = Profile(name="generic", distribution=None, import_name=None)

PROFILES = {p.name: p for p in (TORCHLET, PYTORCH, GENERIC)}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(
            f"unknown profile {name!r}: choose one of {', '.join(sorted(PROFILES))}"
        ) from None


def detect_profile(exists: Callable[[str], bool]) -> Profile:
    """Pick a profile from the paths the bad commit has; generic when nothing matches."""
    for prof in (PYTORCH, TORCHLET):
        if all(exists(p) for p in prof.marker_paths):
            return prof
    return GENERIC
