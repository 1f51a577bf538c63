"""Output is data: what a repository, an oracle or a build wrote is shown, never obeyed.

Commit subjects, author names, refs, an oracle's output and a build's log come from whoever
wrote the repository or the oracle. Every renderer passes them through here, so one of them
can never drive the user's terminal (ANSI/CSI colours and cursor moves, OSC 52 clipboard
writes, OSC 8 hidden links, a bell, a carriage return or backspaces that overwrite what was
printed), close a Markdown code block and turn the rest into live Markdown, or put raw HTML,
a disguised link or an ``@mention`` into the issue a person pastes on GitHub. HTML needs
nothing from here: its templates autoescape every value (:mod:`bisector.app.report.html`).

Control characters become visible rather than vanishing: a C0 control or DEL is shown as its
Unicode control picture (ESC as ``␛``, BEL as ``␇``, a lone CR as ``␍``), a C1 control or a
bidirectional override (the "Trojan source" characters) as ``U+FFFD``.
"""

from __future__ import annotations

import re
from typing import Any

from bisector.base import redact

# C0 controls but tab and newline, DEL, the C1 controls (\x9b is a one-byte CSI), the
# bidirectional embeddings, overrides and isolates, and the Unicode line separators.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029"
                      r"\u202a-\u202e\u2066-\u2069]")
_LINE_CONTROL = re.compile(_CONTROL.pattern[:-1] + r"\n\t]")
REPLACEMENT = "\ufffd"


def _picture(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    if c < 0x20:
        return chr(0x2400 + c)
    if c == 0x7F:
        return "\u2421"
    return REPLACEMENT


def terminal(s: str) -> str:
    """Text of many lines with every control character made visible (tabs and newlines
    kept; CRLF line ends read as newlines)."""
    return _CONTROL.sub(_picture, s.replace("\r\n", "\n"))


def line(s: str) -> str:
    """One line (a subject, a name, a ref): newlines and tabs made visible too."""
    return _LINE_CONTROL.sub(_picture, s)


def data(value: Any) -> Any:
    """A JSON-shaped value with :func:`terminal` applied to every string (and key)."""
    if isinstance(value, str):
        return terminal(value)
    if isinstance(value, dict):
        return {(terminal(k) if isinstance(k, str) else k): data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [data(v) for v in value]
    return value


def safe(value: Any) -> Any:
    """A view (JSON-shaped) as it may leave bisector: redacted, then every control character
    made visible. The one filter of ``show``, ``list``, ``log``, the watch table and events."""
    return data(redact.data(value))


def safe_text(s: str) -> str:
    """Free text as it may leave bisector (a log line, a note, an error)."""
    return terminal(redact.text(s))


def safe_line(s: str) -> str:
    """One line as it may leave bisector (a progress row, a subject)."""
    return line(redact.text(s))


def fence(text: str, info: str = "") -> list[str]:
    """A Markdown code block ``text`` cannot close: the fence is longer than any backtick run
    in it (an oracle's output could otherwise end the block and render as live Markdown)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    mark = "`" * max(3, longest + 1)
    return [mark + line(info).replace("`", ""), text, mark]


def code(s: str) -> str:
    """An inline code span holding ``s`` verbatim (a ref or an oracle's name may hold
    backticks): delimiters longer than any backtick run inside."""
    s = line(s)
    longest = max((len(m) for m in re.findall(r"`+", s)), default=0)
    mark = "`" * (longest + 1)
    pad = " " if s.startswith("`") or s.endswith("`") or not s.strip() else ""
    return f"{mark}{pad}{s}{pad}{mark}"


# @user, @org/team as GitHub reads them: not after a word character (an e-mail address).
_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9_.-]+)?")
# Markdown's inline syntax: emphasis, code, tables, strikethrough, escapes, and the ``]`` that
# makes a link or an image (``](url)``, ``][ref]``, a ``]:`` definition): PyTorch's
# ``[dynamo] ...`` subjects stay readable, and no bracket can become a link.
_PUNCT = re.compile(r"[\\`*|~]|\](?=\s*[(\[:])")
_ENTITY = re.compile(r"&(?=#?[A-Za-z0-9]+;)")
# ``_`` emphasises only at a word's edge (GitHub ignores it inside ``torch._dynamo``'s words).
_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")


def _plain(s: str) -> str:
    s = _PUNCT.sub(lambda m: "\\" + m.group(0), s)
    s = _UNDERSCORE.sub(r"\\_", s)
    s = _ENTITY.sub("&amp;", s)
    return s.replace("<", "&lt;")


def md(s: str) -> str:
    """One line of untrusted text (a commit subject, an author) as Markdown that shows it
    literally: no raw HTML (``<`` as ``&lt;``), no link or image syntax, no emphasis, no
    table cell break, and every ``@mention`` in a code span so it pings nobody."""
    s = line(s)
    out, at = [], 0
    for m in _MENTION.finditer(s):
        out += [_plain(s[at:m.start()]), f"`{m.group(0)}`"]
        at = m.end()
    out.append(_plain(s[at:]))
    return "".join(out)
