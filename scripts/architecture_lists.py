"""Write docs/architecture.md's module lists by floor from the code, between its markers.

The floors are the layering test's ``FLOORS`` (``tests/**/test_layers.py``: the authority the
test enforces, each with its comment); the modules are the ``.py`` files of each package
folder as they are on disk. A hand-written list went stale with every move (issue 51: two
module names the page gave no longer existed), so the page's lists are this script's output
and ``test_architecture_doc.py`` fails when they differ from what it would write.

    python scripts/architecture_lists.py          # rewrite the lists in place
    python scripts/architecture_lists.py --check  # exit 1 when the page is out of date
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "architecture.md"
# The layering test, wherever the tests' folders put it (they mirror bisector/'s).
LAYERS = next(iter(sorted(ROOT.glob("tests/**/test_layers.py"))),
              ROOT / "tests" / "unit" / "test_layers.py")
BEGIN = "<!-- modules by floor: written by scripts/architecture_lists.py, do not edit -->"
END = "<!-- end of the modules by floor -->"


def floors(layers: Path = LAYERS) -> list[tuple[str, list[str]]]:
    """``FLOORS`` top to bottom: each floor's comment and its packages, sorted."""
    out = []
    source = layers.read_text(encoding="utf-8")
    start = source.index("FLOORS")
    for line in source[start:].splitlines()[1:]:
        if line.startswith("]"):
            break
        packages, _, said = line.partition("#")
        names = ast.literal_eval(packages.strip().rstrip(","))
        out.append((said.strip(), sorted(names)))
    return out


def modules(folder: Path) -> list[str]:
    """The modules of one package folder (no ``__init__``, no subpackage's), by name."""
    return sorted(p.stem for p in folder.glob("*.py") if p.name != "__init__.py")


def packages(folder: Path) -> list[Path]:
    """A package folder and the folders of modules under it (``infra/scripts/``, run by path,
    has no ``__init__``), depth first, in name order."""
    out = [folder]
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and any(p.glob("*.py"))):
        out += packages(sub)
    return out


def table(package: Path) -> str:
    """The lists as a Markdown table: floor, folder, its modules."""
    rows = ["| floor | folder | modules |", "|---|---|---|"]
    for said, names in floors():
        first = True
        for name in names:
            if not (package / name).is_dir():
                continue  # a floor's package not there (the layering test says so)
            for folder in packages(package / name):
                rel = folder.relative_to(package).as_posix()
                found = ", ".join(f"`{m}`" for m in modules(folder)) or "-"
                rows.append(f"| {said if first else ''} | `{rel}/` | {found} |")
                first = False
    return "\n".join(rows)


def written(page: str, package: Path = ROOT / "bisector") -> str:
    """``page`` with the text between the markers replaced by :func:`table`."""
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(page):
        raise SystemExit(f"{PAGE}: the markers are missing ({BEGIN!r} ... {END!r})")
    return pattern.sub(lambda _m: f"{BEGIN}\n{table(package)}\n{END}", page, count=1)


def main(argv: list[str]) -> int:
    page = PAGE.read_text(encoding="utf-8")
    new = written(page)
    if "--check" in argv:
        if new != page:
            print(f"{PAGE} is out of date: run python scripts/architecture_lists.py",
                  file=sys.stderr)
            return 1
        return 0
    if new != page:
        PAGE.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
