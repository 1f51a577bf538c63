"""Project profiles: everything project-specific about building and identifying a commit.

PyTorch is one profile; the synthetic torch-like project of the demo and tests is another, and
the generic profile builds any Python project that ``uv build`` can build; the tree profile builds
nothing (a C, Rust or shell repository: probes run in the commit's tree). Keeping this as data
means the tests drive the same code paths that a PyTorch bisection does.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass, field

from bisector.base.errors import UsageError
from bisector.base.kinds import Way


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
    # Build variables that change how fast, not what, is built: left out of the artifact key.
    unkeyed_env: tuple[str, ...] = ("MAX_JOBS",)
    # What the builder container installs into its build environment (a fixed path, so ccache
    # sees identical compiler command lines across commits) before running build_command.
    build_requires: tuple[str, ...] = ("setuptools>=61", "wheel")
    # GPU architectures to build for when no GPU can be asked (``--cuda-arch`` overrides).
    default_cuda_arch: str | None = None
    marker_paths: tuple[str, ...] = ()
    # Prebuilt wheels. The nightly index is profile data; "{variant}" is filled in (cu128, cpu).
    nightly_index: str | None = None
    default_variant: str | None = None
    release_tag: str = "v{version}"
    # A nightly wheel's git_version names a commit on a nightly branch whose subject carries
    # the main-line sha it was cut from (PyTorch's trigger-nightly action writes it so).
    nightly_subject: str = r"nightly release \(([0-9a-fA-F]{40})\)"
    # Nightlies past the index's listing, found at their direct URL (artifacts/nightly_urls):
    # the file whose first version number gives a commit's base version (``2.9.0a0`` ->
    # ``2.9.0.devYYYYMMDD``; None: never look past the listing), where the files lie when
    # the listing names none (``{index}``, ``{project}``, ``{filename}``; otherwise next to
    # the listed ones), and the platform tags worth a HEAD request, in order, as glob patterns
    # over the tags the probed Python installs.
    base_version_file: str | None = None
    nightly_file_url: str = "{index}/{filename}"
    nightly_platforms: tuple[str, ...] = ("*",)
    # Python-only overlays: a change between a wheel's commit and the target may be laid over
    # the installed wheel only if every changed path matches ``overlay_safe`` and none matches
    # ``overlay_unsafe``. ``overlay_generated`` files are the build's own and are kept from the
    # wheel; ``overlay_install`` says which repository paths are installed (same relative path).
    overlay_safe: tuple[str, ...] = ()
    overlay_unsafe: tuple[str, ...] = ()
    overlay_generated: tuple[str, ...] = ()
    overlay_install: tuple[str, ...] = ()
    # Triton pin files (commit pin, version file) and the distributions a pin names.
    triton_pins: tuple[str, ...] = ()
    triton_nightly_dist: str | None = None
    triton_release_dist: str | None = None
    # Build in a throwaway detached worktree of the clone (a ``.git`` that shares its objects
    # and tags) instead of a bare export: for projects that take their version from git
    # (setuptools_scm, hatch-vcs, versioneer, ``git describe``). PyTorch's setup.py is told
    # its version through the environment and gets the pinned third_party/ either way.
    git_checkout: bool = False
    # Installed path = repository path minus this prefix (``src/`` of a src-layout project).
    source_prefix: str = ""
    # Files that may differ in their version field alone and still allow an overlay (the
    # exact check parses them: artifacts/pure.py), and whether an overlay may add a file in a
    # folder the base does not install (a new package: a backend may or may not pick it up).
    overlay_versioned: tuple[str, ...] = ()
    overlay_new_dirs: bool = True
    # Tree paths the base's build leaves out of its wheel: their changes are not installed.
    overlay_left_out: tuple[str, ...] = ()
    # Overlay rules read from each base's own wheel (artifacts/pure.py): pure-Python projects
    # of the generic profile, whose wheel is their tree's Python files under another root.
    derive_overlays: bool = False
    # A pure-Python tree whose wheel is known without a backend is assembled, not built
    # (artifacts/assemble.py says when): the first probe of a small project in milliseconds.
    assemble_pure: bool = False
    # When a probe builds nothing and runs the oracle in the commit's exported tree, as ``git
    # bisect run`` does (:func:`in_tree_at`): "never" (a package is what is probed), "unpackaged"
    # (a commit with no Python packaging, :data:`PACKAGING`: a build there can only fail),
    # "always" (the tree profile: nothing is ever built or installed).
    probe_tree: str = "never"
    # Seconds ``bisect plan`` prices each step at before anything was measured on the
    # repository (steps not named: plan's PyTorch-sized defaults). A small project must never
    # be priced with PyTorch's hour-long build: a cold plan of a 12 s job once said 8.4 h.
    costs: dict[str, float] = field(default_factory=dict)

    def version_for(self, sha: str) -> str:
        """PEP 440 version of a source build, unique per commit like PyTorch's ``+git<sha>``."""
        return f"{self.base_version}+git{sha[:7]}"


def nightly_url(profile: Profile, variant: str | None) -> str | None:
    """The profile's nightly index for ``variant`` (its ``{variant}`` filled in); None when
    the profile has none."""
    tpl = profile.nightly_index
    return tpl.format(variant=variant) if tpl else None


VERSION_TEMPLATE = '__version__ = "{version}"\ngit_version = "{sha}"\n'

TORCHLET = Profile(
    name="torchlet",
    distribution="torchlet",
    import_name="torchlet",
    version_file="torchlet/version.py",
    version_template=VERSION_TEMPLATE,
    base_version="0.1.0a0",
    marker_paths=("torchlet/__init__.py", "csrc/_C.c"),
    default_variant="cpu",
    base_version_file="torchlet/version.py",
    # The layout of the test index (bisector/app/demo/index.py): files under <index>/files/.
    nightly_file_url="{index}/files/{filename}",
    overlay_safe=("torchlet/*.py", "*.md", "docs/*", "tests/*"),
    overlay_unsafe=("csrc/*", "setup.py", "pyproject.toml"),
    overlay_generated=("torchlet/version.py",),
    overlay_install=("torchlet/*",),
    triton_pins=("ci/triton.txt", "ci/triton_version.txt"),
    # A C file and some Python: a build of seconds (make demo), an oracle of a second or two.
    costs={"oracle": 5.0, Way.CACHED: 2.0, Way.PREBUILT: 5.0, Way.OVERLAY: 3.0,
           Way.BUILD: 20.0},
)

PYTORCH = Profile(
    name="pytorch",
    distribution="torch",
    import_name="torch",
    # PyTorch's setup.py writes torch/version.py itself from the git sha; in an exported tree
    # there is no .git, so the sha comes in through the environment, as CI does it.
    build_command=("{python}", "setup.py", "bdist_wheel", "--dist-dir", "{out}"),
    build_env={
        "PYTORCH_BUILD_VERSION": "{version}",
        "PYTORCH_BUILD_NUMBER": "0",
        "USE_CUDA": "1",
        "TORCH_CUDA_ARCH_LIST": "{cuda_arch}",
        "MAX_JOBS": "{max_jobs}",
        "BUILD_TEST": "0",
        "USE_DISTRIBUTED": "0",
        "USE_CCACHE": "1",
        "CMAKE_C_COMPILER_LAUNCHER": "ccache",
        "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
        "CMAKE_CUDA_COMPILER_LAUNCHER": "ccache",
    },
    # The commit's own build requirements (they change over time); the builder installs them.
    build_requires=("-r", "requirements.txt"),
    default_cuda_arch="8.0;8.6;9.0",
    base_version="2.0.0a0",
    marker_paths=("torch/__init__.py", "aten/src/ATen", "c10"),
    nightly_index="https://download.pytorch.org/whl/nightly/{variant}",
    default_variant="cu128",
    base_version_file="version.txt",
    # manylinux_2_28 since the 2.6 era, manylinux2014 / manylinux_2_17 and manylinux1 before.
    nightly_platforms=("manylinux_2_28_*", "manylinux2014_*", "manylinux_2_17_*",
                       "manylinux1_*", "linux_*"),
    overlay_safe=(
        "torch/*.py", "torch/*.pyi", "functorch/*.py",
        "torch/_inductor/codegen/*.h", "torch/_inductor/codegen/aoti_runtime/*",
        "torch/_inductor/kernel/*.jinja", "torch/_inductor/script.ld",
        "torch/_export/serde/*.yaml", "torch/_export/serde/*.thrift",
        "torch/_dynamo/graph_break_registry.json", "torch/utils/benchmark/utils/*",
        "torch/utils/model_dump/*",
        "test/*", "docs/*", "benchmarks/*", ".github/*", ".ci/*", "scripts/*", "*.md",
    ),
    overlay_unsafe=(
        "torch/csrc/*", "torch/lib/*", "functorch/csrc/*", "torch/_C/*.pyi.in",
        "aten/*", "c10/*", "caffe2/*", "tools/*", "torchgen/*", "third_party/*", "cmake/*",
        "*CMakeLists.txt", "setup.py", "pyproject.toml", "requirements*.txt", "version.txt",
        "android/*", ".ci/docker/*",
    ),
    overlay_generated=(
        "torch/version.py", "torch/testing/_internal/generated/annotated_fn_args.py",
    ),
    overlay_install=("torch/*", "functorch/*"),
    triton_pins=(".ci/docker/ci_commit_pins/triton.txt", ".ci/docker/triton_version.txt"),
    triton_nightly_dist="pytorch-triton",
    triton_release_dist="triton",
)

# Any Python project: it may ask git for its version, so it builds in a worktree; and it states
# its build requirements (setuptools-scm, hatchling, hatch-vcs...) in its own pyproject.toml,
# so its build is isolated, as uv does by default, also in the builder container (whose fixed
# build environment, made for PyTorch's ccache hits, would lack them: setuptools then builds
# a setuptools_scm project as version 0.0.0, and a hatchling one not at all).
# Priced as a pure-Python project (``uv build`` in seconds); ``bisect plan`` prices a tree
# with compiled sources (COMPILED_SUFFIXES) with COMPILED_BUILD_S instead.
GENERIC = Profile(name="generic", distribution=None, import_name=None, git_checkout=True,
                  build_env={"UV_NO_BUILD_ISOLATION": "0"}, derive_overlays=True,
                  assemble_pure=True, probe_tree="unpackaged",
                  costs={"oracle": 10.0, Way.CACHED: 2.0, Way.PREBUILT: 10.0, Way.OVERLAY: 3.0,
                         Way.BUILD: 30.0})
COMPILED_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".pyx", ".rs", ".f90", ".go")
COMPILED_BUILD_S = 600.0

# A repository git bisect can do and uv cannot build (C, Rust, shell, a Python tree with no
# packaging), or a project whose oracle needs no install (``--profile tree``): every probe runs
# the oracle in the commit's exported tree, cwd at its root, the chosen Python's environment
# (the oracle's dependencies only, made once) first on PATH. Detected when the bad commit has
# none of PACKAGING. Priced as an oracle run and nothing to make.
TREE = Profile(name="tree", distribution=None, import_name=None, probe_tree="always",
               costs={"oracle": 10.0, Way.CACHED: 0.5, Way.PREBUILT: 0.5, Way.OVERLAY: 0.5,
                      Way.BUILD: 0.5})

# The files whose absence at a commit's root means uv has nothing to build there.
PACKAGING = ("pyproject.toml", "setup.py", "setup.cfg")

PROFILES = {p.name: p for p in (TORCHLET, PYTORCH, GENERIC, TREE)}


def packaged(exists: Callable[[str], bool]) -> bool:
    """Whether a commit (its root's paths, asked through ``exists``) has Python packaging."""
    return any(exists(p) for p in PACKAGING)


def in_tree_at(profile: Profile, exists: Callable[[str], bool]) -> bool:
    """Whether a probe of the commit whose root ``exists`` answers for builds nothing and runs
    the oracle in the commit's tree (the profile's ``probe_tree`` rule)."""
    if profile.probe_tree == "always":
        return True
    return profile.probe_tree == "unpackaged" and not packaged(exists)


def path_matches(path: str, patterns: tuple[str, ...]) -> bool:
    """fnmatch where ``*`` also crosses ``/``: ``torch/*.py`` covers every depth."""
    return any(fnmatch.fnmatchcase(path, pat) for pat in patterns)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise UsageError(
            f"unknown profile {name!r}: choose one of {', '.join(sorted(PROFILES))}"
        ) from None


def detect_profile(exists: Callable[[str], bool]) -> Profile:
    """Pick a profile from the paths the bad commit has: PyTorch's or torchlet's by their
    markers; the tree profile when it has no Python packaging (a C, Rust or shell project:
    nothing uv could build, so probes run in the commit's tree as ``git bisect run`` does);
    generic otherwise."""
    for prof in (PYTORCH, TORCHLET):
        if all(exists(p) for p in prof.marker_paths):
            return prof
    return GENERIC if packaged(exists) else TREE


def report_names(profile: str, repo: str) -> dict[str, str]:
    """How reports name the project and what a probe installs, by its profile: "PyTorch" and
    "torch" for PyTorch; a package's own name otherwise (a torchlet bisection never reads
    "torch from" or "PyTorch version: N/A"); a project with no package (the generic
    profile) by its repository's name, and "package" for what it installs."""
    prof = PROFILES.get(profile)
    if prof is not None and prof.distribution == "torch":
        return {"profile": profile, "name": "PyTorch", "package": "torch"}
    dist = prof.distribution if prof is not None else None
    return {"profile": profile, "name": dist or repo.rstrip("/").rsplit("/", 1)[-1] or profile,
            "package": dist or "package"}
