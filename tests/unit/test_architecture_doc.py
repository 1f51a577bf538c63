"""``docs/architecture.md`` stays true to the code: every module and path it names exists (a
renamed or moved module must take its row along), and every module has a row."""

from __future__ import annotations

import re
from pathlib import Path

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
