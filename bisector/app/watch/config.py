"""The watch's part of ``bisector.toml``: ``[watch]``, ``[[suite]]`` and ``[notify]``.

``cli/config_file.py`` leaves these tables alone; they are read here, only by ``bisect tick``,
and checked completely before the store is opened: a typo is one line naming the file, the
table, the key and the fix (never a suite silently skipped at 03:00). The same two files are
read (the user's, then the repository's, or one ``--config`` file); ``[watch]`` and
``[notify]`` merge key by key, and a later file's suite replaces an earlier one of its name.

```toml
[watch]
bisect = true                 # run a flip's bisection inside the tick (false: leave it stored)
events = "/var/lib/bisector/events"   # event JSON and issue bodies (default: data dir/watch)

[notify]
command = "/usr/local/bin/post-to-chat --channel torch"   # event JSON on stdin, no shell
on = ["flip", "culprit", "inconclusive"]
timeout = 60

[[suite]]
name = "cu128-py312"
repo = "/srv/pytorch"         # the clone bisections run in (git fetch it before the tick)
oracles = ["name_mangling", "./oracles/my_check.py"]
torch = "nightly"             # or "release", "installed", "wheel"
variant = "cu128"
python = "3.12"               # a version (python3.12 on PATH), a name or a path
[suite.bisect]                # any `bisect start` option, for the bisections a flip starts
gpus = "0,1"
```
"""

from __future__ import annotations

import difflib
import math
import re
import shlex
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from bisector.base import defaults
from bisector.base.errors import BisectorError, UsageError
from bisector.base.paths import read_toml
from bisector.oracle.script import load_oracle
from bisector.project.profiles import PROFILES
from bisector.run.config import RECORDED, Request, request_from

SOURCES = ("nightly", "release", "installed", "wheel")
EVENTS = ("flip", "culprit", "inconclusive")
SUITE_KEYS = ("name", "repo", "oracles", "torch", "index", "variant", "python", "wheel",
              "profile", "bisect", "reports")
WATCH_KEYS = ("bisect", "events")
NOTIFY_KEYS = ("command", "on", "timeout")
# `bisect start` options a suite decides itself (range, oracle, torch), not [suite.bisect].
OWN = frozenset({"good", "bad", "oracle", "repo", "find_fix", "regress", "python", "profile",
                 "variant", "nightly_index", "release_index"})
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


@dataclass(frozen=True)
class Suite:
    """One thing watched: these oracles, against the newest torch from ``torch``."""

    name: str
    repo: Path
    oracles: tuple[str, ...]
    torch: str = "nightly"
    index: str | None = None
    variant: str | None = None
    python: str | None = None
    wheel: str | None = None  # a path, or a glob whose newest version is taken
    profile: str | None = None
    start: dict[str, Any] = field(default_factory=dict)  # [suite.bisect], as Request fields
    where: str = ""  # "FILE [[suite]] 'NAME'", for messages
    # A folder of HUD regression reports (JSON) instead of oracles: each tick bisects every
    # regressed range of every report in it not bisected yet (app/watch/reports.py).
    reports: Path | None = None


@dataclass(frozen=True)
class Notify:
    command: tuple[str, ...] = ()
    on: frozenset[str] = frozenset(EVENTS)
    timeout_s: float = 60.0


@dataclass(frozen=True)
class WatchConfig:
    suites: tuple[Suite, ...] = ()
    notify: Notify = Notify()
    bisect: bool = True
    events_dir: Path | None = None
    files: tuple[Path, ...] = ()


def _unknown(key: str, known: tuple[str, ...], where: str) -> UsageError:
    near = difflib.get_close_matches(key, known, n=1)
    hint = f"did you mean {near[0]!r}?" if near else f"known keys: {', '.join(known)}"
    return UsageError(f"{where}: unknown key {key!r}; {hint}")


def _path(value: Any, base: Path) -> Path:
    p = Path(str(value)).expanduser()
    return p if p.is_absolute() else (base / p)


def _str(table: dict[str, Any], key: str, where: str) -> str | None:
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where} {key} = {value!r}: must be a non-empty string")
    return value.strip()


def load(paths: list[Path], contents: list[bytes | None] | None = None) -> WatchConfig:
    """Every watch table of ``paths``, checked; later files win. ``contents`` are the files'
    bytes as the caller read (and trusted) them: what was checked is what is parsed."""
    cfg = WatchConfig(files=tuple(paths))
    suites: dict[str, Suite] = {}
    watch: dict[str, tuple[Any, Path]] = {}
    notify: dict[str, tuple[Any, Path]] = {}
    for i, path in enumerate(paths):
        data = read_toml(path, "fix it or point --config elsewhere",
                         None if contents is None else contents[i])
        for name, into, known in (("watch", watch, WATCH_KEYS), ("notify", notify, NOTIFY_KEYS)):
            table = data.get(name, {})
            if not isinstance(table, dict):
                raise UsageError(f"{path}: [{name}] must be a table")
            for key, value in table.items():
                if key not in known:
                    raise _unknown(key, known, f"{path} [{name}]")
                into[key] = (value, path)
        raw = [*_list(data, "suite", path), *_list(data, "suites", path)]
        seen: set[str] = set()
        for i, table in enumerate(raw, 1):
            suite = _suite(table, path, i)
            if suite.name in seen:
                raise UsageError(f"{path}: two suites are named {suite.name!r}; rename one "
                                 f"(names key the watch's results)")
            seen.add(suite.name)
            suites[suite.name] = suite
    cfg = _watch(cfg, watch)
    return WatchConfig(suites=tuple(suites.values()), notify=_notify(notify),
                       bisect=cfg.bisect, events_dir=cfg.events_dir, files=cfg.files)


def _list(data: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise UsageError(f"{path}: {key} must be an array of tables: write [[suite]] above "
                         f"each suite's keys")
    return value


def _watch(cfg: WatchConfig, table: dict[str, tuple[Any, Path]]) -> WatchConfig:
    bisect, events = cfg.bisect, cfg.events_dir
    if "bisect" in table:
        value, path = table["bisect"]
        if not isinstance(value, bool):
            raise UsageError(f"{path} [watch] bisect = {value!r}: write true or false")
        bisect = value
    if "events" in table:
        value, path = table["events"]
        if not isinstance(value, str) or not value:
            raise UsageError(f"{path} [watch] events = {value!r}: write a folder path")
        events = _path(value, path.resolve().parent)
    return WatchConfig(bisect=bisect, events_dir=events, files=cfg.files)


def _notify(table: dict[str, tuple[Any, Path]]) -> Notify:
    out = Notify()
    if "command" in table:
        value, path = table["command"]
        where = f"{path} [notify] command"
        if not isinstance(value, str) or not value.strip():
            raise UsageError(f"{where} = {value!r}: write the command line as one string")
        try:
            argv = tuple(shlex.split(value))
        except ValueError as e:
            raise UsageError(f"{where} = {value!r}: {e}; fix the quoting") from None
        exe = argv[0]
        if "/" in exe:
            exe = str(_path(exe, path.resolve().parent))
            argv = (exe, *argv[1:])
        # A notifier missing here is not checked now: telling people is no reason to stop
        # watching, so the tick warns when it would run it (notify.send) and goes on.
        out = Notify(command=argv, on=out.on, timeout_s=out.timeout_s)
    if "on" in table:
        value, path = table["on"]
        if not isinstance(value, list) or not all(v in EVENTS for v in value):
            raise UsageError(f"{path} [notify] on = {value!r}: a list of events among "
                             f"{', '.join(EVENTS)}")
        out = Notify(out.command, frozenset(value), out.timeout_s)
    if "timeout" in table:
        value, path = table["timeout"]
        # TOML has nan and inf: nan passed "<= 0" and then crashed the tick's notifier.
        if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and 0 < value <= defaults.MAX_SECONDS):
            raise UsageError(f"{path} [notify] timeout = {value!r}: give positive seconds "
                             f"(finite, at most {defaults.MAX_SECONDS:.0f})")
        out = Notify(out.command, out.on, float(value))
    return out


def _suite(table: dict[str, Any], path: Path, index: int) -> Suite:
    raw_name = table.get("name")
    where = f"{path} [[suite]] #{index}"
    if not isinstance(raw_name, str) or not NAME.fullmatch(raw_name):
        raise UsageError(f"{where}: name = {raw_name!r}: give each suite a name of letters, "
                         f"digits, '.', '_' or '-' (e.g. name = \"cu128-py312\")")
    where = f"{path} [[suite]] {raw_name!r}"
    for key in table:
        if key not in SUITE_KEYS:
            raise _unknown(key, SUITE_KEYS, where)
    repo_s = _str(table, "repo", where)
    if repo_s is None:
        raise UsageError(f"{where}: repo is missing; give the clone bisections run in, e.g. "
                         f"repo = \"/srv/pytorch\"")
    repo = _path(repo_s, path.resolve().parent)
    if not repo.is_dir():
        raise UsageError(f"{where} repo = {repo_s!r}: {repo} is not a folder; clone the "
                         f"project there or fix the path")
    torch = _str(table, "torch", where) or "nightly"
    if torch not in SOURCES:
        near = difflib.get_close_matches(torch, SOURCES, n=1)
        raise UsageError(f"{where} torch = {torch!r}: not a torch source; use one of "
                         f"{', '.join(SOURCES)}" + (f" (did you mean {near[0]!r}?)" if near
                                                    else ""))
    index_url = _str(table, "index", where)
    if index_url is not None and not index_url.startswith(("http://", "https://")):
        raise UsageError(f"{where} index = {index_url!r}: give an http(s) URL of a package "
                         f"index, e.g. https://download.pytorch.org/whl/nightly/cu128")
    if index_url is not None and torch not in ("nightly", "release"):
        raise UsageError(f"{where}: index is for torch = \"nightly\" or \"release\"; remove it "
                         f"or change torch")
    wheel = _str(table, "wheel", where)
    if (wheel is None) == (torch == "wheel"):
        raise UsageError(f"{where}: torch = \"wheel\" and a wheel = \"PATH\" go together; "
                         f"give both or neither")
    if wheel is not None:
        wheel = str(_path(wheel, path.resolve().parent))
    reports = _str(table, "reports", where)
    if reports is not None:
        if "oracles" in table:
            raise UsageError(f"{where}: reports and oracles do not go together: a reports "
                             f"suite's oracles come from each report; keep one")
        return Suite(name=raw_name, repo=repo, oracles=(), torch=torch, index=index_url,
                     variant=_str(table, "variant", where),
                     python=_python(_str(table, "python", where), where),
                     profile=_profile(_str(table, "profile", where), where) or "pytorch",
                     start=_start(table.get("bisect", {}), where), where=where,
                     reports=_path(reports, path.resolve().parent))
    oracles = table.get("oracles")
    if not isinstance(oracles, list) or not oracles or not all(
            isinstance(o, str) and o for o in oracles):
        raise UsageError(f"{where}: oracles = {oracles!r}: give a list of oracle names or "
                         f"paths, e.g. oracles = [\"name_mangling\"] (or reports = "
                         f"\"FOLDER\" of dashboard reports)")
    resolved = tuple(_oracle(o, path.resolve().parent, where) for o in oracles)
    names = [name for _spec, name in resolved]
    twice = next((n for n in names if names.count(n) > 1), None)
    if twice is not None:
        raise UsageError(f"{where}: two oracles are named {twice!r} (results are keyed by "
                         f"the oracle's name); list each once or rename one file")
    return Suite(name=raw_name, repo=repo, oracles=tuple(spec for spec, _ in resolved),
                 torch=torch, index=index_url,
                 variant=_str(table, "variant", where),
                 python=_python(_str(table, "python", where), where), wheel=wheel,
                 profile=_profile(_str(table, "profile", where), where),
                 start=_start(table.get("bisect", {}), where), where=where)


def _oracle(spec: str, base: Path, where: str) -> tuple[str, str]:
    """A bundled or team oracle by name, or a path relative to the config file's folder;
    with the name its results are keyed by."""
    if "/" in spec or spec.endswith(".py"):
        spec = str(_path(spec, base))
    try:
        return spec, load_oracle(spec).name
    except BisectorError as e:
        raise type(e)(f"{where} oracles: {e.message}") from None


def _python(value: str | None, where: str) -> str | None:
    if value is None:
        return None
    name = f"python{value}" if re.fullmatch(r"\d+\.\d+", value) else value
    found = str(Path(name).expanduser()) if "/" in name else shutil.which(name)
    if found is None or not Path(found).is_file():
        raise UsageError(f"{where} python = {value!r}: no such interpreter here; give a "
                         f"version with python3.X on PATH, a name on PATH or a path")
    return found


def _profile(value: str | None, where: str) -> str | None:

    if value is not None and value not in PROFILES:
        raise UsageError(f"{where} profile = {value!r}: use one of {', '.join(PROFILES)}")
    return value


def _start(table: Any, where: str) -> dict[str, Any]:
    """``[suite.bisect]``: ``bisect start`` options (dashes or underscores), checked as
    ``start`` would check them."""
    if not isinstance(table, dict):
        raise UsageError(f"{where}: bisect must be a table of `bisect start` options")
    known = tuple(f.name.replace("_", "-") for f in fields(Request)
                  if f.name not in OWN | RECORDED)
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = key.replace("-", "_")
        if key.replace("_", "-") not in known:
            if name in OWN:
                raise UsageError(f"{where} [suite.bisect] {key}: the suite sets it itself; "
                                 f"remove it")
            raise _unknown(key, known, f"{where} [suite.bisect]")
        out[name] = tuple(value) if isinstance(value, list) else value
    try:
        req = request_from({"good": "a", "bad": "b", "oracle": "o", **out})
        req.check()
    except UsageError as e:
        raise UsageError(f"{where} [suite.bisect]: {e.message}") from None
    return {k: getattr(req, k) for k in out}
