"""What ``bisect`` says of itself: ``bisect`` alone prints its usage and command list (not one
``error:`` line holding the whole help), every command's summary is a whole sentence (not
click's first characters cut with ``...``), and the docs site's command reference, generated
from the commands when the site is built, shows real defaults (never click's
``Sentinel.UNSET``) and the same summaries."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import pytest

from bisector.cli import cli
from bisector.cli.helptext import command_rows, summary
from tests.support import invoke

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def _commands(group: click.Group, prefix: str = "bisect") -> list[tuple[str, click.Command]]:
    out = []
    with click.Context(group, info_name=prefix) as ctx:
        for name, command in command_rows(group, ctx):
            out.append((f"{prefix} {name}", command))
            if isinstance(command, click.Group):
                out += _commands(command, f"{prefix} {name}")
    return out


def _reference_page() -> str:
    """docs/reference.md as the site builds it (scripts/mkdocs_hooks.py)."""
    spec = importlib.util.spec_from_file_location("mkdocs_hooks",
                                                  ROOT / "scripts" / "mkdocs_hooks.py")
    assert spec is not None and spec.loader is not None
    hooks: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = SimpleNamespace(file=SimpleNamespace(src_uri="reference.md"))
    text: str = hooks.on_page_markdown(
        (ROOT / "docs" / "reference.md").read_text(encoding="utf-8"), page=page)
    return text


def test_bisect_alone_prints_the_usage_and_the_commands(tmp_path: Path) -> None:
    r = invoke(env={"BISECTOR_HOME": str(tmp_path)})
    assert r.exit_code == 2  # click's own code for a group called with nothing
    lines = r.stderr.splitlines()
    assert lines[0] == "Usage: bisect [OPTIONS] COMMAND [ARGS]...", r.stderr
    assert not any(ln.startswith("error:") for ln in lines), r.stderr
    assert "Commands:" in lines
    listed = {ln.split()[0] for ln in lines[lines.index("Commands:") + 1:]
              if ln.startswith("  ") and not ln.startswith("   ")}
    assert {"start", "plan", "show", "resume", "oracle"} <= listed
    r = invoke("oracle", env={"BISECTOR_HOME": str(tmp_path)})
    assert r.exit_code == 2 and r.stderr.startswith("Usage: bisect oracle "), r.stderr


def test_every_summary_is_a_whole_sentence(tmp_path: Path) -> None:
    for path, command in _commands(cli):
        said = summary(command)
        assert said.endswith(".") and not said.endswith("..."), (path, said)
        assert said.count("(") == said.count(")") and said.count("`") % 2 == 0, (path, said)
    text = invoke("--help", env={"BISECTOR_HOME": str(tmp_path)}).stdout
    commands = text[text.index("Commands:"):]
    assert "..." not in commands, commands
    assert "Stop a bisection." in commands  # was "... killed on their..."


def test_the_command_reference_has_real_defaults_and_whole_summaries() -> None:
    page = _reference_page()
    assert "Sentinel" not in page and "UNSET" not in page
    assert "mkdocs-click" not in page
    for path, _command in _commands(cli):
        assert re.search(rf"^#+ {re.escape(path)}$", page, re.M), path
    rows = re.findall(r"^\| \[`[\w-]+`\]\(#[\w-]+\) \| (.*) \|$", page, re.M)
    assert len(rows) == len(_commands(cli))
    for said in rows:
        assert said.endswith(".") and not said.endswith("..."), said
    # The real defaults: a value where there is one, nothing where there is none.
    assert re.search(r"^\| `--repo` \| PATH \| Path of the git clone\. \| `\.` \|$", page, re.M)
    assert re.search(r"^\| `--format` \| .*\| `markdown` \|$", page, re.M)
    assert re.search(r"^\| `--db` \| URL\\\|PATH \| .* \|  \|$", page, re.M)
