"""MkDocs hooks: the site's home page is the README, and the command reference is generated
from the click commands, both when the site is built.

The README links to the pages as ``docs/PAGE.md`` (right on GitHub and in a clone); on the
site the home page sits beside them, so those links lose their ``docs/`` prefix here.
``docs/reference.md``'s marker line becomes every command's help, usage and options
(``bisector.cli.helptext.reference``: whole-sentence summaries, real defaults).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parent.parent / "README.md"
REFERENCE_MARKER = "<!-- the command reference: scripts/mkdocs_hooks.py -->"


def on_page_markdown(markdown: str, page: Any, **_kw: Any) -> str:
    if page.file.src_uri == "index.md":
        return re.sub(r"\]\(docs/", "](", README.read_text(encoding="utf-8"))
    if page.file.src_uri == "reference.md":
        from bisector.cli import cli
        from bisector.cli.helptext import reference

        return markdown.replace(REFERENCE_MARKER, reference(cli))
    return markdown
