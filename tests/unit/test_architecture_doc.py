"""``docs/architecture.md`` stays true to the code: every module and path it names exists (a
renamed or moved module must take its row along), and every module has a row."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "artifacts", "base", "cli", "core", "executors", "infra", "oracle",
            "project", "queue", "run", "store", "web", "worker")
# Files the document names that are not bisector's: a wheel's own file it reads.
NOT_OURS = frozenset({"version.py"})


def _exists(name: str) -> bool:
    if "/" not in name:  # a file beside the row's first one: anywhere in the package
        return name in NOT_OURS or any((ROOT / "bisector").rglob(name))
    return any((base / name).exists() for base in (ROOT / "bisector", ROOT))


def test_every_module_the_architecture_names_exists() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    files = set(re.findall(r"`([A-Za-z_][\w./-]*\.py)`", text))
    modules = set(re.findall(rf"`((?:{'|'.join(PACKAGES)})/[\w/]+)`", text))
    assert len(files) > 100  # the pattern still reads the document
    missing = [f for f in sorted(files) if not _exists(f)]
    missing += [m for m in sorted(modules) if not (
        (ROOT / "bisector" / f"{m}.py").exists() or (ROOT / "bisector" / m).is_dir())]
    assert missing == [], f"docs/architecture.md names what does not exist: {missing}"


def test_every_module_has_its_row() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    unnamed = []
    for path in sorted((ROOT / "bisector").rglob("*.py")):
        rel = path.relative_to(ROOT / "bisector").as_posix()
        if path.name == "__init__.py" or rel.startswith("infra/scripts/"):
            continue  # packages, and the scripts run inside probes (named by their folder)
        if rel[:-3] not in text and f"`{path.name}`" not in text:  # a row, or the diagram
            unnamed.append(rel)
    assert unnamed == [], f"modules docs/architecture.md does not name: {unnamed}"


def _lists() -> Any:
    """scripts/architecture_lists.py, which writes the page's modules by floor."""
    spec = importlib.util.spec_from_file_location(
        "architecture_lists", ROOT / "scripts" / "architecture_lists.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_modules_by_floor_are_the_codes() -> None:
    """The page's lists of modules by floor are what the script writes from ``FLOORS`` and the
    folders: a module added, moved or removed without running it fails here."""
    lists = _lists()
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert lists.written(page) == page, "run: python scripts/architecture_lists.py"


def test_the_lists_follow_a_module_added_to_a_floor(tmp_path: Path) -> None:
    lists = _lists()
    pkg = tmp_path / "bisector"
    for name in ("app", "base"):
        (pkg / name).mkdir(parents=True)
        (pkg / name / "__init__.py").write_text("")
    (pkg / "app" / "plan.py").write_text("")
    page = f"# A\n\n{lists.BEGIN}\nSTALE LIST\n{lists.END}\n\nafter\n"
    first = lists.written(page, pkg)
    assert "`plan`" in first and "STALE" not in first and first.endswith("\nafter\n")
    (pkg / "base" / "kinds.py").write_text("")
    assert "`kinds`" in lists.written(first, pkg) != first


def _defined(path: Path) -> set[str]:
    """The names a module defines or imports at any depth (functions, classes, assignments)."""
    out: set[str] = set()
    for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            out |= {x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name)}
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in n.names}
    return out


def test_every_name_the_docs_give_a_module_is_in_it() -> None:
    """``folder/module.name`` anywhere in docs/: the module exists and defines the name (the
    page said ``cli/__init__.list_cmd`` and ``cli/__init__._run_and_report`` long after
    both had moved to cli/queries.py and cli/running.py)."""
    named = re.compile(rf"(?<![\w/.-])((?:{'|'.join(PACKAGES)})/[\w/]+)\.([A-Za-z_]\w*)")
    stale = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            for module, name in named.findall(line):
                if name == "py":
                    continue
                path = ROOT / "bisector" / f"{module}.py"
                if not path.is_file():
                    path = ROOT / "bisector" / module / "__init__.py"
                if not path.is_file() or name not in _defined(path):
                    stale.append(f"{page.name}:{n}: {module}.{name}")
    assert stale == []
