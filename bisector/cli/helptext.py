"""What ``bisect --help`` and the docs site's command reference say of each command.

A command's **summary** (the line beside its name in a group's ``--help``, and in the
reference's table) is a whole sentence, never click's first 45-80 characters with ``...``: the
command's ``short_help`` when it has one, else its help's first sentence up to its first
top-level ``:`` or ``;``, its parentheses left out when that is still longer than a line's
share. :func:`reference` is the Markdown of ``docs/reference.md`` (scripts/mkdocs_hooks.py puts
it there when the site is built): every command's help, usage and options, each default the
real one or none.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

import click
import click.core

# A summary longer than this loses its parenthetical remarks (the reference and ``--help``
# show the whole help elsewhere).
SHORT = 80
# click's "no default given" (click >= 8.3); never shown as a default.
_UNSET: Any = getattr(click.core, "UNSET", object())


def _top_level(text: str) -> Iterator[tuple[int, str]]:
    """(index, character) of ``text`` outside parentheses and backquotes."""
    depth, quoted = 0, False
    for i, ch in enumerate(text):
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and not quoted:
            yield i, ch


def _first_paragraph(help_text: str) -> str:
    lines = [ln for ln in inspect.cleandoc(help_text).split("\n\n")[0].splitlines()
             if ln.strip() != "\b"]
    return " ".join(" ".join(lines).split())


def _drop_parentheses(text: str) -> str:
    kept, depth, quoted = [], 0, False
    for ch in text:
        if ch == "`":
            quoted = not quoted
        if not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")" and depth:
            depth -= 1
            continue
        if depth == 0:
            kept.append(ch)
    return re.sub(r" +([,.;:])", r"\1", " ".join("".join(kept).split()))


def summary(command: click.Command) -> str:
    """``command`` in one whole sentence (see the module's docstring)."""
    if command.short_help:
        return " ".join(command.short_help.split())
    text = _first_paragraph(command.help or "")
    end = len(text)
    for i, ch in _top_level(text):
        if ch in ":;" or (ch == "." and text[i + 1:i + 2] in ("", " ")):
            end = i
            break
    sentence = text[:end].rstrip(" .")
    if len(sentence) > SHORT:
        sentence = _drop_parentheses(sentence).rstrip(" .")
    return f"{sentence}." if sentence else ""


def command_rows(group: click.Group, ctx: click.Context) -> list[tuple[str, click.Command]]:
    """The group's visible commands, as ``--help`` lists them."""
    rows = []
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if command is not None and not command.hidden:
            rows.append((name, command))
    return rows


# The command reference (docs/reference.md) --------------------------------------------------


def _inline(text: str) -> str:
    """Help text as Markdown prose: no raw HTML, no emphasis from a ``TORCH_*``."""
    return " ".join(text.split()).replace("<", "&lt;").replace("*", "\\*")


def _cell(text: str) -> str:
    """``text`` inside a Markdown table cell: one line, no column break."""
    return _inline(text).replace("|", "\\|")


def _paragraphs(help_text: str) -> list[str]:
    """The help as Markdown paragraphs (click's ``\\b`` marks a block kept as it is)."""
    out = []
    for block in inspect.cleandoc(help_text).split("\n\n"):
        lines = block.splitlines()
        if lines and lines[0].strip() == "\b":
            out.append("\n".join(f"    {ln}" for ln in lines[1:]))
        else:
            out.append(_inline(block))
    return out


def default_of(option: click.Option, ctx: click.Context) -> str:
    """The option's default as ``--help`` would name it, or "" when it has none to show: no
    default given, a flag that is off, an empty multiple, a default computed at run time
    (its help says what it is)."""
    if isinstance(option.show_default, str):
        return option.show_default
    value = option.get_default(ctx, call=False)
    if value is None or value is _UNSET or callable(value) or value in ((), []):
        return ""
    if option.is_flag and isinstance(value, bool):
        if option.secondary_opts:
            return (option.opts if value else option.secondary_opts)[-1]
        return option.opts[-1] if value else ""
    if isinstance(value, (list, tuple)):
        return " ".join(map(str, value))
    return str(value)


def _type_of(option: click.Option) -> str:
    if option.is_flag:
        return "flag"
    if isinstance(option.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in option.type.choices)
    return _cell(option.metavar or option.type.name.upper())


def _option_row(option: click.Option, ctx: click.Context) -> str:
    names = ", ".join(f"`{n}`" for n in option.opts)
    if option.secondary_opts:
        names += " / " + ", ".join(f"`{n}`" for n in option.secondary_opts)
    said = (option.help or "").lower()
    extra = " (repeatable)" if option.multiple and "repeatable" not in said else ""
    extra += " (required)" if option.required and "required" not in said else ""
    default = default_of(option, ctx)
    shown = f"`{_cell(default)}`" if default else ""
    return (f"| {names} | {_type_of(option)} | {_cell(option.help or '')}{extra} "
            f"| {shown} |")


def _command_docs(command: click.Command, ctx: click.Context, level: int) -> Iterator[str]:
    yield f"{'#' * level} {ctx.command_path}"
    yield ""
    for paragraph in _paragraphs(command.help or command.short_help or ""):
        yield paragraph
        yield ""
    pieces = " ".join(command.collect_usage_pieces(ctx))
    yield "```text"
    yield f"{ctx.command_path} {pieces}".rstrip()
    yield "```"
    yield ""
    options = [p for p in command.get_params(ctx)
               if isinstance(p, click.Option) and not p.hidden]
    if options:
        yield "| option | value | what it does | default |"
        yield "|---|---|---|---|"
        yield from (_option_row(o, ctx) for o in options)
        yield ""
    if isinstance(command, click.Group):
        yield from _command_table(command, ctx)
        for name, sub in command_rows(command, ctx):
            with click.Context(sub, info_name=name, parent=ctx) as sub_ctx:
                yield from _command_docs(sub, sub_ctx, level + 1)


def _anchor(path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def _command_table(group: click.Group, ctx: click.Context) -> Iterator[str]:
    yield "| command | what it does |"
    yield "|---|---|"
    for name, sub in command_rows(group, ctx):
        path = f"{ctx.command_path} {name}"
        yield f"| [`{name}`](#{_anchor(path)}) | {_cell(summary(sub))} |"
    yield ""


def reference(group: click.Group, prog_name: str = "bisect") -> str:
    """Markdown for every command of ``group``: the group's help and command table, then each
    command's help, usage and options table (level-2 headings, ``bisect start``)."""
    with click.Context(group, info_name=prog_name, **group.context_settings) as ctx:
        return "\n".join(_command_docs(group, ctx, 2)) + "\n"
