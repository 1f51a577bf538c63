"""The docs are a site (mkdocs.yml, built --strict by make test) and the README a front page:
at most about 250 lines, every page it names exists, and no section of the one-page README the
site replaced was lost (tests/fixtures/readme_headings.txt: its headings, each of which must
still be a heading of the README or of a page)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

pytestmark = [pytest.mark.unit]


def _headings(text: str) -> set[str]:
    return {line.strip() for line in text.splitlines() if re.match(r"#{2,6} ", line)}


def _nav_pages() -> list[str]:
    return re.findall(r":\s*([\w-]+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), re.M)


def test_the_readme_is_a_front_page() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, len(lines)
    text = "\n".join(lines)
    for must in ("make demo", "make test", "## Where to read on"):
        assert must in text


def test_every_section_of_the_old_readme_has_a_home() -> None:
    before = (ROOT / "tests" / "fixtures" / "readme_headings.txt").read_text().splitlines()
    now = _headings((ROOT / "README.md").read_text(encoding="utf-8"))
    for page in DOCS.glob("*.md"):
        # A page's sections: its own ## parts, and the README's headings one level down.
        now |= _headings(page.read_text(encoding="utf-8"))
    lost = [h for h in before if h.strip() not in now]
    assert lost == []


def test_every_page_is_in_the_site_and_every_readme_link_resolves() -> None:
    nav = _nav_pages()
    pages = sorted(p.name for p in DOCS.glob("*.md"))
    assert sorted(nav) == pages
    links = re.findall(r"\]\((docs/[^)#]+)", (ROOT / "README.md").read_text(encoding="utf-8"))
    assert links and all((ROOT / link).is_file() for link in links), links
    # The README's "Where to read on" names every page (the home page is the README).
    assert {Path(link).name for link in links} >= set(pages) - {"index.md"}
