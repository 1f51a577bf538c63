"""MkDocs hooks: the site's home page is the README, read when the site is built.

The README links to the pages as ``docs/PAGE.md`` (right on GitHub and in a clone); on the
site the home page sits beside them, so those links lose their ``docs/`` prefix here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"


def on_page_markdown(markdown: str, page: Any, **_kw: Any) -> str:
    if page.file.src_uri != "index.md":
        return markdown
    return re.sub(r"\]\(docs/", "](", README.read_text(encoding="utf-8"))
