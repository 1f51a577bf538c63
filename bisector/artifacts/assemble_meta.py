"""What an assembled wheel's metadata says, read from ``pyproject.toml``'s static tables
(artifacts/assemble.py writes the files): which backends qualify, the ``[project]`` table only
where every backend would accept it and write it alike, and the text of ``METADATA`` and
``entry_points.txt``. Anything a backend would refuse to build (a missing readme, an unknown
key, an invalid license expression) or could write otherwise is declined here with the reason,
so the real build decides.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# Backend module -> the distribution that provides it (the only build requirement allowed,
# with ``wheel`` beside setuptools, which older setuptools projects list).
BACKENDS = {"setuptools.build_meta": "setuptools", "hatchling.build": "hatchling",
            "flit_core.buildapi": "flit-core", "pdm.backend": "pdm-backend"}
PROJECT_SINCE = {"setuptools": "61", "flit-core": "3.2"}  # first to read [project]

def project_table(pyproject: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    system = pyproject.get("build-system")
    if not isinstance(system, dict):
        return None, "no [build-system] table"
    backend = BACKENDS.get(str(system.get("build-backend", "")))
    if backend is None or "backend-path" in system:
        return None, "not a backend known to build pure wheels the same way"
    from packaging.requirements import InvalidRequirement, Requirement  # lazy
    from packaging.utils import canonicalize_name

    allowed = {backend, "wheel"} if backend == "setuptools" else {backend}
    try:
        reqs = [Requirement(r) for r in system.get("requires", [])]
    except (InvalidRequirement, TypeError):
        return None, "unreadable build requirements"
    names = {canonicalize_name(r.name) for r in reqs}
    if not names <= allowed:
        return None, f"build plugins ({', '.join(sorted(names - allowed))})"
    # A backend pinned or capped below the first version that reads [project] (setuptools
    # 61, flit-core 3.2) would build another wheel, or none: a build says.
    from packaging.version import Version

    first = Version(PROJECT_SINCE.get(backend, "0"))
    for r in reqs:
        if canonicalize_name(r.name) != backend:
            continue
        candidates = [first, *(Version(sp.version.rstrip(".*")) for sp in r.specifier
                               if sp.version.rstrip(".*")[:1].isdigit())]
        if r.url or not any(v >= first and r.specifier.contains(v, prereleases=True)
                            for v in candidates):
            return None, "a build backend pinned or capped below what reads [project]"
        if any(sp.operator in ("==", "===", "~=") for sp in r.specifier):
            return None, f"a build backend pinned to one release ({r})"
    project = pyproject.get("project")
    if not isinstance(project, dict):
        return None, "no [project] table"
    if project.get("dynamic"):
        dynamic = project["dynamic"]
        named = ", ".join(map(str, dynamic)) if isinstance(dynamic, list) else str(dynamic)
        return None, f"dynamic [project] fields ({named}): the backend computes them"
    if not isinstance(project.get("name"), str) or not isinstance(project.get("version"), str):
        return None, "no static name and version"
    return {**project, "_backend": backend}, ""


# What a backend accepts, and all that may reach a metadata line: a value outside these (a
# newline in a summary, say, that would add a header of its own) is declined, never written.
NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")  # a project, extra or script
OBJECT = re.compile(r"[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?( *\[[\w ,.-]*\])?\Z")  # mod:attr [x]


def _requires(project: dict[str, Any]) -> list[str]:
    from packaging.requirements import Requirement  # lazy

    every = [Requirement(r) for r in project.get("dependencies") or []]
    for reqs in (project.get("optional-dependencies") or {}).values():
        every += [Requirement(r) for r in reqs]
    if any(r.url for r in every):  # hatchling refuses them unless told to allow them
        raise ValueError("a direct reference (name @ URL)")
    from packaging.utils import canonicalize_name  # lazy

    if project["_backend"] == "hatchling" and any(
            canonicalize_name(r.name) == canonicalize_name(project["name"]) for r in every):
        raise ValueError("an extra naming the project itself (hatchling expands it)")
    lines = [f"Requires-Dist: {Requirement(r)}" for r in project.get("dependencies") or []]
    for extra, reqs in sorted((project.get("optional-dependencies") or {}).items()):
        if not NAME.match(extra) or canonicalize_name(extra) != extra:
            raise ValueError(f"extra {extra!r}, not spelled as normalized")
        lines.append(f"Provides-Extra: {extra}")
        for r in reqs:
            req = Requirement(r)
            marker = f"({req.marker}) and " if req.marker else ""
            req.marker = None
            lines.append(f'Requires-Dist: {req}; {marker}extra == "{extra}"')
    return lines


def metadata_text(project: dict[str, Any], version: str) -> str:
    from packaging.specifiers import SpecifierSet  # lazy

    if not NAME.match(project["name"]):
        raise ValueError(f"project name {project['name']!r}")
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}", f"Version: {version}"]
    summary = project.get("description")
    if isinstance(summary, str):
        if "\n" in summary or "\r" in summary:
            raise ValueError("a description of more than one line")
        if not summary.strip():  # flit writes it empty, the others leave it out
            raise ValueError("an empty description")
        lines.append(f"Summary: {summary}")
    given = project.get("requires-python")
    if isinstance(given, str):
        if str(SpecifierSet(given)) != given:
            raise ValueError(f"requires-python {given!r}, not spelled as normalized")
        lines.append(f"Requires-Python: {given}")
    return "\n".join([*lines, *_requires(project)]) + "\n"


def entry_points_text(project: dict[str, Any]) -> str:
    named = project.get("entry-points") or {}
    if {"console_scripts", "gui_scripts"} & set(named):
        raise ValueError("scripts under [project.entry-points], which PEP 621 forbids")
    groups = {"console_scripts": project.get("scripts") or {},
              "gui_scripts": project.get("gui-scripts") or {}, **named}
    for group, eps in groups.items():
        for k, v in eps.items():
            if not (NAME.match(group) and NAME.match(k) and OBJECT.match(str(v))):
                raise ValueError(f"entry point {group}/{k}")
    return "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in sorted(eps.items())) + "\n"
                   for g, eps in groups.items() if eps)


# The keys of a [project] table (PEP 621, license-files of PEP 639, import-names of PEP 794):
# setuptools refuses a table with any other.
PROJECT_KEYS = frozenset({
    "name", "version", "description", "readme", "requires-python", "license",
    "license-files", "authors", "maintainers", "keywords", "classifiers", "urls", "scripts",
    "gui-scripts", "entry-points", "dependencies", "optional-dependencies", "dynamic",
    "import-names", "import-namespaces"})
READMES = (".md", ".rst", ".txt")  # what hatchling knows the content type of


def _strs(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(x, str) for x in v.values())


# The types of PEP 621's fields (setuptools validates them; a string where a list belongs
# would be read letter by letter here).
SHAPES: dict[str, Callable[[Any], bool]] = {
    "description": lambda v: isinstance(v, str),
    "requires-python": lambda v: isinstance(v, str),
    "readme": lambda v: isinstance(v, str) or _str_map(v),
    "license": lambda v: isinstance(v, str) or _str_map(v),
    "authors": lambda v: isinstance(v, list) and all(_str_map(x) for x in v),
    "maintainers": lambda v: isinstance(v, list) and all(_str_map(x) for x in v),
    "keywords": _strs, "classifiers": _strs, "dependencies": _strs,
    "optional-dependencies": lambda v: isinstance(v, dict) and all(_strs(x) for x in v.values()),
    "urls": _str_map, "scripts": _str_map, "gui-scripts": _str_map,
    "entry-points": lambda v: isinstance(v, dict) and all(_str_map(x) for x in v.values()),
}


def table_problem(project: dict[str, Any], is_file: Callable[[str], bool]) -> str:
    """Why a backend might refuse to build this ``[project]`` table, or ``""``: a build that
    fails is a fact about the commit (a skip), which a wheel assembled anyway would hide.
    ``is_file``: whether the commit's tree holds that regular file."""
    unknown = sorted(set(project) - PROJECT_KEYS - {"_backend"})
    if unknown:
        return f"unknown [project] key {unknown[0]!r} (setuptools refuses it)"
    for key, shape in SHAPES.items():
        if key in project and not shape(project[key]):
            return f"[project] {key} of a type the backends refuse"
    if isinstance(project.get("license"), str) and any(
            c.startswith("License ::") for c in project.get("classifiers") or []):
        return "an SPDX license with License :: classifiers (setuptools 77 refuses both)"
    if "license-files" in project:
        return "license-files (flit refuses patterns that match nothing)"
    readme = project.get("readme")
    named = readme if isinstance(readme, str) else \
        readme.get("file") if isinstance(readme, dict) else None
    if readme is not None and not isinstance(readme, str | dict):
        return "a readme that is neither a file name nor a table"
    if isinstance(named, str):
        if not is_file(named):
            return f"readme {named!r} is not a file of the commit (the build would fail)"
        if isinstance(readme, str) and not named.lower().endswith(READMES):
            return f"readme {named!r} of a kind hatchling cannot name"
    license_ = project.get("license")
    if isinstance(license_, str):
        try:
            from packaging.licenses import canonicalize_license_expression  # lazy
            canonicalize_license_expression(license_)
        except (ImportError, ValueError):
            return f"license {license_!r}, not an SPDX expression this packaging checks"
    elif isinstance(license_, dict) and isinstance(license_.get("file"), str) and \
            not is_file(license_["file"]):
        return f"license file {license_['file']!r} is not a file of the commit"
    return ""
