"""What of this machine a public report must not carry, and the line another machine types.

The issue (app/report/issue.py) and the HTML report are read on other machines: a path of this
one (the clone, bisector's data and cache folders, the home folder, an interpreter's
site-packages) means nothing there and tells a stranger who ran it where. :func:`scrubber`
rewrites those paths in any text into placeholders that app/report/paste.py turns into shell
words; :func:`portable_request` and :func:`reproduce` rewrite the bisection's own request into
the ``bisect start`` line a reader types beside their clone (no interpreter, installed torch,
GPUs or local index of this box). Apart from the issue's layout because the HTML report and
the tests use the same rules without the issue's text.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from bisector.app.report import paste
from bisector.base.paths import cache_dir, data_dir
from bisector.run.config import VARIANT, Request, reproduce_command

# A path-like word (no spaces, quotes or colons) and the package folders inside one. Found in
# two linear steps (the word, then its last package folder), never one pattern with nested
# repetition: ``(?:/[^/...]+)*/site-packages/`` backtracks exponentially on a deep path with no
# package folder in it, which any oracle may print (issue 32).
_WORD = re.compile(r"[^\s\"':]+")
_PACKAGES = ("/site-packages/", "/dist-packages/")
# Paths that name a person wherever they appear: home folders and Inductor's per-user cache.
_GENERIC = [(re.compile(r"/(?:home|Users)/[^/\s\"':]+"), "~"),
            (re.compile(r"(?<![\w.-])/root(?=/)"), "~"),
            (re.compile(r"torchinductor_[A-Za-z0-9_.-]+"), "torchinductor_<user>")]


def scrubber(repo_path: str, recorded: dict[str, str] | None = None,
             repo_as: str = paste.REPO) -> Callable[[str], str]:
    """A function that rewrites machine paths in a text, longest prefix first: the clone (as
    ``repo_as``), the folders recorded when the bisection was made (it may have run on another
    machine or as another user than the one rendering), this machine's, then the generic
    patterns."""
    rec = recorded or {}
    # BISECTOR_HOME: everything of bisector's under one folder (the home folder reads "~")
    home = os.environ.get("BISECTOR_HOME")
    ours = str(Path(home).expanduser().resolve()) if home else ""
    prefixes = [(repo_path.rstrip("/"), repo_as), (str(data_dir()), "<bisector-data>"),
                ("" if ours == str(Path.home()) else ours, "<bisector-home>"),
                (str(cache_dir()), "<bisector-cache>"), (str(Path.home()), "~"),
                (rec.get("data", ""), "<bisector-data>"),
                (rec.get("cache", ""), "<bisector-cache>"), (rec.get("home", ""), "~")]
    prefixes = sorted({(p.rstrip("/"), r) for p, r in prefixes if len(p) > 1},
                      key=lambda x: -len(x[0]))

    # A prefix stands for a folder only up to a path boundary: a clone at .../ev must not
    # turn .../evorc.sh into <repo>orc.sh.
    bounded = [(re.compile(re.escape(prefix) + r"(?![^/\s\"':,;()\[\]<>|`])"), placeholder)
               for prefix, placeholder in prefixes]

    def scrub(text: str) -> str:
        for pattern, placeholder in bounded:
            text = pattern.sub(placeholder, text)
        text = _WORD.sub(_site, text)
        for pattern, placeholder in _GENERIC:
            text = pattern.sub(placeholder, text)
        return text

    return scrub


def _site(m: re.Match[str]) -> str:
    """A word with its prefix up to the last package folder shortened to ``…/site-packages/``
    (the prefix is this machine's interpreter or environment, the rest is the package's)."""
    word = m.group(0)
    first = word.find("/")
    if first < 0:
        return word
    at, folder = max((word.rfind(f), f) for f in _PACKAGES)
    if at < first:
        return word
    head = word[:first]  # a word shortened already keeps its one "…" (scrubbing twice is once)
    return f"{head if head.endswith('…') else head + '…'}{folder}{word[at + len(folder):]}"


def _is_path(value: str) -> bool:
    return value.startswith(("/", "./", "../", "~", "file:"))


LOOPBACK = {"localhost", "127.0.0.1", "::1", "0.0.0.0"}


def _is_loopback_url(value: str) -> bool:
    """An index served on this machine's loopback (a test index, the demo's, a tunnel): it
    lived only here, often only during the run, and means nothing on another machine."""
    try:
        host = urlsplit(value).hostname
    except ValueError:
        return False
    return bool(host) and (host in LOOPBACK or str(host).startswith("127."))


def portable_request(req: Request, repo_name: str, good: str | None = None,
                     bad: str | None = None) -> Request:
    """The request as another machine would type it.

    The clone by name; ``good``/``bad`` as given (shas, or tags that resolve to them: a
    branch like ``main`` moves); the oracle as ``./FILE`` when it was a path (its source is in
    the report, to be saved under that name); no ``--python``, ``--installed-base`` or
    ``--gpus`` (this machine's interpreter, torch and GPUs); an index that is a local path or
    a loopback URL (``http://127.0.0.1:PORT/...``) falls back to the default index."""
    changes: dict[str, Any] = {"repo": Path(repo_name), "python": None,
                               "installed_base": None, "gpus": None, "jobs": None,
                               "from_log": None}  # its marks are the report's probes
    if good:
        changes["good"] = good
    if bad:
        changes["bad"] = bad
    if "/" in req.oracle or req.oracle.endswith(".py"):
        changes["oracle"] = f"./{Path(req.oracle).name}"
    for f in fields(Request):
        value = getattr(req, f.name)
        if f.name not in changes and isinstance(value, str) and _is_path(value):
            changes[f.name] = None if f.name.endswith("_index") else Path(value).name
        elif f.name.endswith("_index") and isinstance(value, str) and _is_loopback_url(value):
            changes[f.name] = None
    return replace(req, **changes)


def portable(d: dict[str, Any], req: Request) -> Request:
    """The bisection's request as another machine would type it (:func:`portable_request`)."""
    return portable_request(req, clone_name(d), d["good"].get("portable"),
                            d["bad"].get("portable"))


def clone_name(d: dict[str, Any]) -> str:
    return (d["github"] or "").rsplit("/", 1)[-1] or Path(d["repo"]).name


def probed_variant(d: dict[str, Any]) -> str | None:
    """The variant the probed torches were (``+cu130`` of ``2.11.0+cu130``), when every probe
    that says agrees: the line must name what ran, not the profile's default."""
    found = {str(v).rpartition("+")[2] for p in d.get("probes", [])
             if (v := (p.get("facts") or {}).get("package_version")) and "+" in str(v)}
    return found.pop() if len(found) == 1 and VARIANT.fullmatch(next(iter(found))) else None


def reproduce(d: dict[str, Any], req: Request, scrub: Callable[[str], str] | None = None) -> str:
    """The bisector line (after a ``git clone`` when the GitHub repository is known). With
    ``scrub`` each word is pasteable (app/report/paste.py): a path inside the clone reads
    ``"$PWD"/NAME/...`` (the line is typed beside the clone, and a command oracle runs in each
    probed commit's tree, so the clone's file needs its full path)."""
    name = clone_name(d)
    # The line carries --env as given (Request.typed_env): what the run inherited is a fact
    # of that box, said beside it (result_text.inherited_line); the variant is the one probed.
    variant = probed_variant(d) or req.variant
    line = reproduce_command(portable(d, replace(req, variant=variant)))
    if scrub is not None:
        line = paste.join(shlex.split(line), scrub, paste.beside(name))
    if d["github"]:
        return f"git clone https://github.com/{d['github']}.git {shlex.quote(name)}\n{line}"
    return line
