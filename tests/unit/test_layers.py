"""The folders are the layers: every import of bisector runs downward, and nothing is circular.

Read from the source with ``ast`` (function-level and ``TYPE_CHECKING`` imports included, since
a circle hidden in a function is still a circle), so the picture in docs/architecture.md stays
true as the code changes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

PACKAGE = Path(__file__).resolve().parents[2] / "bisector"

# Top to bottom; a package may import its own floor and the floors below it, never above.
FLOORS: list[set[str]] = [
    {"cli", "web", "worker"},  # entry points
    {"app"},  # use cases, renderers, the watch: the composition root
    {"run"},  # configuration, the runner's loop and its strategies, pipeline, lease, factory
    {"artifacts", "executors", "oracle", "project", "queue"},  # the parts a probe is made of
    {"core", "store"},  # pure search and statistics; all SQL
    {"infra"},  # processes, containers, ownership; scripts run by path
    {"base"},  # kinds, defaults, errors, paths, events
]
# Entry points the CLI starts (``bisect serve``, ``bisect worker``); never the other way.
ENTRY_CALLS = {("cli", "web"), ("cli", "worker")}
LAZY = "lazy"  # the word a function-level import's comment must hold


def floor_of(package: str) -> int:
    return next(i for i, names in enumerate(FLOORS) if package in names)


def modules(root: Path) -> dict[str, Path]:
    out = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def imports(root: Path) -> list[tuple[str, str, int, bool, str]]:
    """(importer, imported module, line, inside a function, the line and the one above)."""
    mods = modules(root)
    pkg = root.name

    def target(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    found = []
    for m, p in mods.items():
        text = p.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text)
        # A function's imports in a row share the comment above the first of them.
        group_start: dict[int, int] = {}
        for f in ast.walk(tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = end = -2
                for n in sorted((n for n in ast.walk(f)
                                 if isinstance(n, (ast.Import, ast.ImportFrom))),
                                key=lambda n: n.lineno):
                    if n.lineno != end + 1:
                        start = n.lineno
                    group_start[id(n)] = start
                    end = n.end_lineno or n.lineno
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            if not names:
                continue
            targets = {t for n in names if n.split(".")[0] == pkg and (t := target(n))
                       and t != m and not m.startswith(t + ".")}
            nested = id(node) in group_start
            first = group_start.get(id(node), node.lineno)
            around = "\n".join(lines[max(0, first - 2):node.end_lineno])
            found += [(m, t, node.lineno, nested, around) for t in sorted(targets)]
    return found


def problems(root: Path) -> list[str]:
    """Every break of the layering in the package at ``root``, one line each."""
    out = []
    mods = modules(root)
    for m in mods:
        if m.count(".") == 1 and not (root / m.split(".")[1]).is_dir() and \
                m.split(".")[1] != "__main__":
            out.append(f"{m} lies flat in {root.name}/: put it in its layer's folder")
    edges: dict[str, set[str]] = {m: set() for m in mods}
    seen: set[str] = set()
    for m, t, line, nested, around in imports(root):
        edges[m].add(t)
        a, b = m.split(".")[1:2], t.split(".")[1:2]
        if not a or not b or a[0] == "__main__":
            continue
        pa, pb = a[0], b[0]
        upward = floor_of(pb) < floor_of(pa) or (pb in FLOORS[0] and pa != pb)
        if upward and (pa, pb) not in ENTRY_CALLS:
            out.append(f"{m}:{line} imports {t}, a floor above it")
        if nested and LAZY not in around and f"{m}:{line}" not in seen:
            seen.add(f"{m}:{line}")
            out.append(f"{m}:{line} imports {t} inside a function without a comment saying "
                       f"why it is {LAZY}")
    out += [f"import circle: {' -> '.join(c)}" for c in circles(edges)]
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative enough for a
    package of a few hundred modules)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_every_floor_is_named_once() -> None:
    names = [n for floor in FLOORS for n in floor]
    assert len(names) == len(set(names))
    on_disk = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert on_disk == set(names), "a package folder that no floor names (or the reverse)"


def test_bisector_imports_only_downward_and_has_no_circle() -> None:
    assert problems(PACKAGE) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / "bisector" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / "bisector"


def test_the_check_sees_an_upward_import_a_hidden_circle_and_a_flat_module(
        tmp_path: Path) -> None:
    pkg = _write(tmp_path, {
        "__init__.py": "",
        "flat.py": "",
        "base/__init__.py": "",
        "base/kinds.py": "from bisector.run import loop\n",  # base -> run: upward
        "run/__init__.py": "",
        "run/loop.py": "def f():\n    from bisector.run import other\n",  # no comment
        "run/other.py": "from bisector.run import loop  # a circle with loop\n",
        "core/__init__.py": "",
        "core/ok.py": "def f():\n    # lazy: start-up time\n    from bisector.base import kinds\n",
    })
    found = problems(pkg)
    assert any("flat.py" in x or "bisector.flat lies flat" in x for x in found)
    assert any(x.startswith("bisector.base.kinds:1 imports bisector.run") for x in found)
    assert any("bisector.run.loop:2" in x and LAZY in x for x in found)
    assert any(x.startswith("import circle") and "bisector.run.other" in x for x in found)
    assert not any("bisector.core.ok" in x for x in found)
