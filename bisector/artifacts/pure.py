"""Pure-Python projects: the overlay rules of the generic profile, read from one real build.

The generic profile builds any project ``uv build`` can build, and it declares no
Python-only paths, so before this every probe of a small pure-Python project was a source
build: a wheel build in a fresh isolated environment, seconds each, where ``git bisect run``
pays milliseconds. Such a project's wheel is its Python files copied under another root
(``src/pkg/x.py`` -> ``pkg/x.py``) plus metadata, so once one commit is built, its wheel says
exactly which tree paths are installed where, and any later commit that changes only those
files (and files a build never reads) is that wheel with the changed files laid over it.

The rules are derived from the wheel, never guessed from the tree (:func:`layout_of`):

- the wheel must be pure (``Root-Is-Purelib: true``, a ``none-any`` tag, no ``.data``
  folder): no compiled extension, no scripts or headers installed elsewhere;
- every file it installs must be a file of the base commit's tree, byte for byte (its blob
  id), under one common prefix: a build that generated or rewrote a file (``_version.py``
  of setuptools_scm, a compiled template) makes the project ineligible;
- the version must be static (``[project] version``, not ``dynamic``): a version a build asks
  git or code for cannot be known without building.

Files of the packages' folders that the wheel leaves out (the backend's excludes) stay out:
the build settings cannot have changed, so the probed commit's build would leave them out
too; a new file beside one of them, or a deletion that empties a folder, is a build.

A change between the base B and the probed commit C is then laid over (:func:`derive`) when
it is a ``.py`` file in one of the wheel's package folders (a new file only in a folder B
already installs: a new package may or may not be picked up by the backend's discovery), a
file outside the packages that no build reads (docs, tests, Markdown; anything else, e.g.
``setup.py``, ``MANIFEST.in``, a top-level module, ``requirements.txt``, rules it out), or
``pyproject.toml`` / ``setup.cfg`` differing only in the version field (:func:`version_only`:
dependencies, entry points, build settings changed -> a real build). The installed
``METADATA`` is rewritten to C's version (:func:`metadata_for`), so
``importlib.metadata.version`` in the probe answers what C's own build would have.
"""

from __future__ import annotations

import configparser
import hashlib
import re
import tomllib
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import git

from bisector.project.profiles import Profile

# Paths outside the installed packages that no build backend reads for a wheel's contents.
NEUTRAL = ("*.md", "*.rst", "docs/*", "doc/*", "tests/*", "test/*", ".github/*",
           "CHANGES*", "CHANGELOG*", "HISTORY*", "NEWS*", "AUTHORS*", ".gitignore",
           ".pre-commit-config.yaml", "tox.ini", "noxfile.py", ".readthedocs.y*ml")
VERSIONED = ("pyproject.toml", "setup.cfg")


@dataclass(frozen=True)
class Layout:
    """How one pure wheel maps its commit's tree: ``prefix + installed path`` is the tree path."""

    prefix: str
    packages: tuple[str, ...]  # top-level installed folders (packages)
    modules: tuple[str, ...]  # top-level installed single-file modules
    dist_info: str
    files: tuple[str, ...] = ()  # every installed path but the dist-info's
    # Tree paths in the packages' folders that the wheel leaves out (the backend's excludes).
    left_out: tuple[str, ...] = ()


def _blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


def static_version(text: str | None) -> str | None:
    """``[project] version`` of a pyproject.toml when it is static, else None."""
    if text is None:
        return None
    try:
        project = tomllib.loads(text).get("project")
    except tomllib.TOMLDecodeError:
        return None
    if not isinstance(project, dict) or "version" in (project.get("dynamic") or []):
        return None
    version = project.get("version")
    return version if isinstance(version, str) else None


def _read(repo: git.Repo, sha: str, path: str) -> str | None:
    try:
        data: bytes = (repo.commit(sha).tree / path).data_stream.read()
    except KeyError:
        return None
    return data.decode(errors="replace")


def layout_of(repo: git.Repo, sha: str, wheel: Path) -> Layout | None:
    """The layout of ``wheel`` built from ``sha``, or None when the project is not one whose
    later commits can be overlaid on it (see the module's rules)."""
    if static_version(_read(repo, sha, "pyproject.toml")) is None:
        return None
    try:
        with zipfile.ZipFile(wheel) as z:
            names = [n for n in z.namelist() if not n.endswith("/")]
            infos = [n for n in names if n.split("/")[0].endswith(".dist-info")]
            dist_info = infos[0].split("/")[0] if infos else ""
            if not dist_info or any(n.split("/")[0].endswith(".data") for n in names):
                return None
            meta = z.read(f"{dist_info}/WHEEL").decode(errors="replace")
            tags = re.findall(r"^Tag:\s*(\S+)", meta, re.M)
            if "Root-Is-Purelib: true" not in meta or not tags or \
                    not all(t.endswith("-none-any") for t in tags):
                return None
            files = {n: _blob_id(z.read(n)) for n in names if not n.startswith(dist_info + "/")}
    except (OSError, KeyError, zipfile.BadZipFile):
        return None
    if not files:
        return None
    by_id: dict[str, list[str]] = {}
    for b in repo.commit(sha).tree.traverse():
        if isinstance(b, git.Blob):
            by_id.setdefault(b.hexsha, []).append(str(b.path))
    prefixes: set[str] | None = None
    for name, blob in files.items():
        here = {p[: len(p) - len(name)] for p in by_id.get(blob, ())
                if p == name or p.endswith("/" + name)}
        prefixes = here if prefixes is None else prefixes & here
        if not prefixes:
            return None  # generated or rewritten by the build, or no one root for all
    if prefixes is None or len(prefixes) != 1:
        return None
    prefix = prefixes.pop()
    packages = sorted({n.split("/")[0] for n in files if "/" in n})
    modules = sorted(n for n in files if "/" not in n)
    roots = tuple(f"{prefix}{pkg}/" for pkg in packages)
    left_out = sorted(p for paths in by_id.values() for p in paths
                      if p.startswith(roots) and p[len(prefix):] not in files)
    return Layout(prefix, tuple(packages), tuple(modules), dist_info, tuple(sorted(files)),
                  tuple(left_out))


def derive(profile: Profile, layout: Layout | None) -> Profile:
    """``profile`` with overlay rules for ``layout`` (unchanged without one: no overlays)."""
    if layout is None:
        return profile
    p = layout.prefix
    installed = (*(f"{p}{pkg}/*" for pkg in layout.packages), *(p + m for m in layout.modules))
    return replace(
        profile,
        overlay_safe=(*(f"{p}{pkg}/*.py" for pkg in layout.packages),
                      *(p + m for m in layout.modules),
                      *(p + f for f in layout.files if not f.endswith(".py")), *NEUTRAL),
        overlay_left_out=layout.left_out,
        overlay_unsafe=(),
        overlay_install=installed,
        overlay_versioned=VERSIONED,
        overlay_new_dirs=False,
        source_prefix=p,
        version_file=f"{layout.dist_info}/METADATA",
        version_template=None,
    )


def _masked(path: str, text: str | None) -> Any:
    if text is None:
        return None
    if path.endswith(".toml"):
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return ("unparsable", text)
        if isinstance(data.get("project"), dict):
            data["project"].pop("version", None)
        return data
    cfg = configparser.ConfigParser(interpolation=None)
    try:
        cfg.read_string(text)
    except configparser.Error:
        return ("unparsable", text)
    if cfg.has_section("metadata"):
        cfg.remove_option("metadata", "version")
    return {s: dict(cfg.items(s)) for s in cfg.sections()}


def version_only(repo: git.Repo, base: str, target: str, path: str) -> bool:
    """``path`` differs between the commits in its version field alone (parsed, so comments
    and spacing do not count; a dependency, entry point or build setting does)."""
    return same_but_version(path, _read(repo, base, path), _read(repo, target, path))


def same_but_version(path: str, before: str | None, after: str | None) -> bool:
    """Two texts of ``path`` (pyproject.toml, setup.cfg) equal once parsed, their version
    field left out; a version that is no longer static never counts as equal."""
    if before is None or after is None:
        return False
    if path.endswith(".toml") and static_version(after) is None:
        return False  # the version went dynamic: a build decides it
    return bool(_masked(path, before) == _masked(path, after))


def metadata_for(base_text: str | None, repo: git.Repo, target: str) -> str | None:
    """The base wheel's METADATA with the version ``target``'s own build would write."""
    version = static_version(_read(repo, target, "pyproject.toml"))
    if base_text is None or version is None:
        return None
    try:
        from packaging.version import InvalidVersion, Version  # lazy: only for overlays
        version = str(Version(version))
    except InvalidVersion:
        return None
    return re.sub(r"^Version: .*$", f"Version: {version}", base_text, count=1, flags=re.M)


def unpack(wheel: Path, site: Path) -> bool:
    """Install ``wheel`` into ``site`` by unpacking it, as an installer would, when that is
    all an installer would do: a pure wheel (no ``.data``, purelib) that requires nothing
    (no ``Requires-Dist`` outside extras) and has no entry points (no scripts to write).
    False, with nothing written, otherwise: the caller installs it with uv. Saves the
    installer's start and resolution (a fifth of a second) on every probe of a small
    project."""
    try:
        with zipfile.ZipFile(wheel) as z:
            names = z.namelist()
            infos = {n.split("/")[0] for n in names if n.split("/")[0].endswith(".dist-info")}
            if len(infos) != 1:
                return False
            info = infos.pop()
            meta = z.read(f"{info}/METADATA").decode(errors="replace")
            wheel_meta = z.read(f"{info}/WHEEL").decode(errors="replace")
            needs = [ln for ln in re.findall(r"^Requires-Dist:(.*)$", meta, re.M)
                     if "extra ==" not in ln.replace("extra==", "extra ==")]
            if (needs or f"{info}/entry_points.txt" in names
                    or "Root-Is-Purelib: true" not in wheel_meta
                    or any(n.split("/")[0].endswith(".data") for n in names)):
                return False
            for n in names:
                parts = n.split("/")
                if n.startswith("/") or "\\" in n or any(p in (".", "..") for p in parts):
                    return False
                # Never over a file the environment has (an oracle dependency of the same
                # name, hard-linked from the skeleton and uv's cache: writing into it would
                # change them): uv replaces such a package properly.
                if not n.endswith("/") and (site / n).exists():
                    return False
            z.extractall(site)
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    (site / info / "INSTALLER").write_text("bisector\n")
    return True
