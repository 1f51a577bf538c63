"""Oracles: scripts that answer "is this commit good?" by their exit code.

An oracle's identity is the sha256 of its bytes, so editing an oracle can never reuse verdicts
of the old version. Metadata rides along as PEP 723 inline script metadata: ``dependencies``
for its environment plus a ``[tool.bisector]`` table for what bisector needs to know.

An oracle file runs with the probed environment's ``python``, unless its first line is a ``#!``
naming another interpreter (``#!/bin/bash``): then it runs as that line says, the environment's
``bin`` first on PATH. A command oracle (``bisect start ... -- CMD``) is stored as a small
document (:mod:`bisector.oracle.command`) and hashed like a file. A signature (``match``: the
failure that is the bug, :mod:`bisector.core.signature`) joins the identity with the polarity
it judges under (:attr:`Oracle.judging`).

Names given with ``--oracle NAME`` resolve only inside the oracles directories (a name can never
climb out of one): ``$BISECTOR_ORACLES_DIR`` first, where a team keeps its own, then the bundled
ones. Anything that looks like a path (``./x.py``, ``/abs/x.py``) is taken as is.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import cattrs

from bisector.base.errors import OracleError
from bisector.oracle.metadata import OracleMeta as OracleMeta
from bisector.oracle.metadata import parse_metadata as parse_metadata
from bisector.oracle.names import bundled_oracles_dir as bundled_oracles_dir
from bisector.oracle.names import oracle_dirs as oracle_dirs
from bisector.oracle.names import team_oracles_dir as team_oracles_dir

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


# The first line of a command oracle's document (oracle/command.py).
MARKER = ("# bisector command oracle: runs in the probed commit's tree, the environment's bin "
          "first on PATH")


def argv_of(content: bytes | str) -> tuple[str, ...] | None:
    """The argv of a command oracle's document; None for an oracle file."""
    text = content.decode("utf-8", "replace") if isinstance(content, bytes) else content
    if not text.startswith(MARKER + "\n"):
        return None
    try:
        argv = json.loads(text.rstrip("\n").rsplit("\n", 1)[-1])
    except json.JSONDecodeError:
        return None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        return None
    return tuple(argv)


@dataclass(frozen=True)
class Oracle:
    name: str
    path: Path
    content: bytes
    meta: OracleMeta
    # What judges its runs besides its bytes: ("match", regex) and ("bug", polarity) when a
    # signature is in force (from its metadata or --match). Empty for a plain oracle.
    judging: tuple[tuple[str, str], ...] = ()

    @property
    def content_sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def sha256(self) -> str:
        """The identity verdicts are keyed by: the bytes' hash, or for an oracle judged by a
        signature, a hash of the bytes' hash, the signature and its polarity, so verdicts
        judged without it (or under the other polarity) are never reused as if with it."""
        if not self.judging:
            return self.content_sha256
        blob = json.dumps([self.content_sha256, [list(j) for j in self.judging]])
        return hashlib.sha256(b"bisector-judging\0" + blob.encode()).hexdigest()

    @property
    def match(self) -> str | None:
        """The signature in force (``--match`` or the metadata's), once bound to a polarity."""
        return dict(self.judging).get("match")

    @property
    def argv(self) -> tuple[str, ...] | None:
        """A command oracle's command (``-- CMD``); None for an oracle file."""
        return argv_of(self.content)

    @property
    def in_tree(self) -> bool:
        """Runs in the probed commit's exported tree, as ``git bisect run`` does: a command.
        An oracle file runs in a scratch folder of its own."""
        return self.argv is not None

    @property
    def python(self) -> bool:
        """Run by the environment's python (no ``#!``, or one naming Python)."""
        return foreign_interpreter(self.content) is None

    def stored_meta(self) -> dict[str, Any]:
        """The metadata as the store keeps it beside the bytes, with what judges it besides
        them (``materialise_oracle`` rebuilds the identity from it)."""
        plain: dict[str, Any] = cattrs.Converter().unstructure(asdict(self.meta))
        plain["judging"] = [list(j) for j in self.judging]
        return plain

    @property
    def ident(self) -> str:
        return f"{self.name}@{self.sha256[:12]}"


def foreign_interpreter(content: bytes) -> str | None:
    """The ``#!`` line of a script that is not Python (``#!/bin/bash``), else None.

    A Python shebang (``#!/usr/bin/env python3``, ``#!/usr/bin/python``) still runs with the
    probed environment's python: that is the interpreter an oracle is meant to test, whatever
    the path on its first line says."""
    if not content.startswith(b"#!"):
        return None
    line = content.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    words = [w for w in line[2:].split() if not w.startswith("-")]
    if words and os.path.basename(words[0]) == "env":
        words = words[1:]
    name = os.path.basename(words[0]) if words else ""
    return None if re.fullmatch(r"python[0-9.]*", name) else line


def resolve_oracle(spec: str, oracles_dir: Path | None = None) -> Path:
    # A path is explicit (./x.py, ../x.py, /abs/x.py, ~/x.py, or any *.py); anything else is a
    # name, and a name never leaves the oracles directory.
    if spec.startswith(("./", "../", "/", "~")) or spec.endswith(".py"):
        p = Path(spec).expanduser()
        if not p.is_file():
            raise OracleError(f"oracle file {spec} does not exist: check the path")
        return p.resolve()
    if not NAME_RE.match(spec) or ".." in spec:
        raise OracleError(
            f"oracle name {spec!r} is not a plain name: use a name from `bisect oracles` "
            f"or a path like ./my_oracle.py"
        )
    bases = [d.resolve() for d in oracle_dirs(oracles_dir)]
    for base in bases:
        for cand in (base / f"{spec}.py", base / spec):
            resolved = cand.resolve()
            if resolved.is_file() and resolved.parent == base:
                return resolved
    raise OracleError(
        f"no oracle named {spec!r} in {' or '.join(map(str, bases))}: run `bisect oracles` to "
        f"list them, or pass a path like ./my_oracle.py"
    )


def load_oracle(spec: str, oracles_dir: Path | None = None) -> Oracle:
    path = resolve_oracle(spec, oracles_dir)
    content = path.read_bytes()
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as e:
        # Stored as text, a lossy decode would run other bytes than the ones hashed.
        raise OracleError(f"{path} is not UTF-8 text (byte {e.start}): save it as UTF-8"
                          ) from None
    try:
        if foreign_interpreter(content) is None:  # a bash oracle is not Python
            compile(content, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:
        raise OracleError(f"{path}:{e.lineno}: the oracle does not compile ({e.msg}): fix it "
                          f"and try `bisect check --oracle {path}`") from None
    meta = parse_metadata(text, str(path))
    return Oracle(name=path.stem, path=path, content=content, meta=meta)


def list_oracles(oracles_dir: Path | None = None) -> list[Oracle]:
    """Every oracle a name can reach, in lookup order; one that a team's oracle of the same
    name shadows is left out (``--oracle NAME`` would never run it)."""
    out: list[Oracle] = []
    for base in oracle_dirs(oracles_dir):
        names = {o.name for o in out}
        for p in sorted(base.glob("*.py")):
            if p.name.startswith("_") or not p.is_file() or p.stem in names:
                continue
            out.append(load_oracle(str(p.resolve()), base))
    return out
