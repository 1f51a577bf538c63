"""``bisector.toml``: defaults for every option, from the user's file and the repository's.

People run the same bisection flags every time (``--gpus 0,1 --executor docker``); writing
them once is what click's ``default_map`` is for, so a configured value behaves exactly like a
built-in default: the command line still wins, and ``--help`` shows the value in force and the
file it came from. Two files are read, the later winning key by key:

1. the user's: ``$BISECTOR_CONFIG``, else ``bisector.toml`` in the user config folder
   (``$BISECTOR_HOME/config`` when that is set, so tests never read a real one);
2. the repository's: ``bisector.toml`` at the root of the git clone the current folder is in
   (never a parent folder of the clone, nothing outside a git repository).

A repository's file is untrusted input (a clone can hold anything): until the user trusts its
exact content (``bisect trust``, app/trust.py) only the inert keys in :data:`INERT` apply; keys
that run a program, name a host, a path, an image or a database, or weaken isolation or caches
are ignored, with one line naming them and the command that trusts the file, and so are its
``[watch]``, ``[[suite]]`` and ``[notify]`` tables.

Layout: ``[defaults]`` applies to every command that has the option; ``[start]``, ``[plan]``,
``[oracle.new]`` ... to one command. Keys are the option names without dashes in front
(``build-jobs = 4``). ``[watch]`` and ``[[suite]]`` belong to the nightly watch and are left to
it. Every key and value is checked before any command runs: a typo is a one-line error naming
the file, the key and the fix, never a silently ignored setting.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import click

from bisector.base.errors import UsageError
from bisector.base.paths import read_toml, user_config_file
from bisector.cli.helptext import command_rows, summary

if TYPE_CHECKING:
    from bisector.artifacts.remote import Address

FILE_NAME = "bisector.toml"
ALL = "defaults"
# Tables another part of bisector reads from the same file (the nightly watch).
RESERVED = frozenset({"watch", "suite", "suites", "notify", "artifacts"})
META_KEY = "bisector.config_sources"
# What a repository's file may set before the user trusts it: choices about the search and
# its output, nothing that picks a program, a host, a path, an image, a database or weakens
# isolation. Every other key (and every key a later release adds) waits for `bisect trust`.
INERT = frozenset({
    "good", "bad", "regress", "find-fix", "ancestry-path", "into-merge", "compiler-bisect",
    "confirm", "match", "any-failure",
    "timeout", "profile", "variant", "prebuilt", "offline", "manual", "cuda-arch", "max-jobs",
    "jobs", "build-jobs", "prefetch", "build-timeout", "gpus", "gpu", "enqueue", "cost", "json",
    "format", "limit", "wide", "columns", "description",
})  # ctx.meta: (command path, param name) -> where it came from
# Options given as text that are a path when they hold a slash (an interpreter, an oracle's
# file): relative ones resolve against the file's folder, as click.Path options do.
PATH_VALUES = frozenset({"python", "oracle"})


class Loaded:
    """The merged ``default_map`` and, per (command path, option), the file and table that set
    it (for ``--help``). Plain classes here, not dataclasses: every command loads this module,
    and importing `dataclasses` would add to the start of each (make bench, section 12)."""

    def __init__(self, files: list[Path] | None = None) -> None:
        self.default_map: dict[str, Any] = {}
        self.sources: dict[tuple[str, str], str] = {}
        self.files: list[Path] = files or []
        self.ignored: dict[Path, list[str]] = {}  # untrusted file -> keys
        self.links: set[Path] = set()  # untrusted because they are symbolic links
        # The user's [artifacts] url, checked: run/policy.py decides whether it is in force.
        self.artifacts: Address | None = None

    def notes(self) -> list[str]:
        """One line per untrusted file whose keys were ignored."""
        return [f"note: {path} {self._why(path)}, so {', '.join(keys)} from it "
                f"{'is' if len(keys) == 1 else 'are'} ignored: {self._fix(path)}"
                for path, keys in self.ignored.items()]

    def _why(self, path: Path) -> str:
        return "is a symbolic link" if path in self.links else "is not trusted"

    def _fix(self, path: Path) -> str:
        if path in self.links:
            return "trust holds only for a file at its own place (replace the link with a copy)"
        return f"review it, then run bisect trust {path}"


class ConfigFile(NamedTuple):
    path: Path
    trusted: bool  # the user's own file, or a repository's whose content the user trusted
    content: bytes | None = None  # what was read, once: the bytes trusted are the bytes parsed
    link: bool = False  # a repository's file that is a symbolic link: never trusted


def user_file() -> Path:
    return user_config_file()


def repo_file(start: Path) -> Path | None:
    """``bisector.toml`` at the root of the git clone holding ``start`` (the nearest folder
    with ``.git``), or None: outside a clone, or above one, a file belongs to someone else."""
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            f = folder / FILE_NAME
            return f if f.is_file() else None
    return None


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise UsageError(f"{path}: cannot be read ({e.strerror}); fix it or remove it "
                         f"(set BISECTOR_CONFIG to use another file)") from None


def given(path: Path) -> ConfigFile:
    """A file the user named (``--config FILE``): theirs, so trusted, read once."""
    if not path.is_file():
        raise UsageError(f"--config {path}: no such file; fix the path")
    return ConfigFile(path, True, _read(path))


def files(cwd: Path | None = None) -> list[ConfigFile]:
    """The files read, user first (the repository's wins, key by key, where it may). Each is
    read once here; the repository's never through a link (a link is read for its inert keys
    and never trusted)."""
    out = [ConfigFile(f, True, _read(f)) for f in (user_file(),) if f.is_file()]
    repo = repo_file(cwd or Path.cwd())
    if repo is not None and all(repo.resolve() != f.path.resolve() for f in out):
        # lazy: only a clone with its own bisector.toml needs the trust record
        from bisector.app import trust

        try:
            content = trust.read(repo)
        except trust.LinkError:
            out.append(ConfigFile(repo, False, _read(repo), link=True))
        except OSError as e:
            raise UsageError(f"{repo}: cannot be read ({e.strerror}); fix it or remove "
                             f"it") from None
        else:
            out.append(ConfigFile(repo, trust.is_trusted(repo, content), content))
    return out


def trusted(found: list[ConfigFile]) -> list[ConfigFile]:
    """The files whose every table applies (the watch reads only these)."""
    return [f for f in found if f.trusted]


def _commands(group: click.Group, prefix: tuple[str, ...] = ()
              ) -> dict[tuple[str, ...], click.Command]:
    """Every command by its path under ``group`` (``("oracle", "new")``)."""
    out: dict[tuple[str, ...], click.Command] = {}
    for name, cmd in group.commands.items():
        out[(*prefix, name)] = cmd
        if isinstance(cmd, click.Group):
            out.update(_commands(cmd, (*prefix, name)))
    return out


def _options(cmd: click.Command) -> dict[str, click.Option]:
    """Options by their config key: the longest flag without its dashes (``build-jobs``)."""
    out: dict[str, click.Option] = {}
    for p in cmd.params:
        if isinstance(p, click.Option) and p.name and p.name != "help":
            longs = [o for o in p.opts if o.startswith("--")]
            key = (max(longs, key=len) if longs else p.opts[0]).lstrip("-")
            out[key] = p
    return out


def _check_value(cmd: click.Command, opt: click.Option, value: Any, where: str,
                 base: Path) -> Any:
    """The value as the option would take it; relative paths are the config file's (its own
    folder, links resolved), never the folder the user stands in: ``python = "./tools/py"``
    in a trusted file runs that file's tool, not one of the clone the user is in."""
    def resolved(word: str) -> str:
        p = Path(word).expanduser()
        return str(p if p.is_absolute() else (base / p))

    if isinstance(value, str) and (isinstance(opt.type, click.Path) or (
            opt.name in PATH_VALUES and "/" in value)):
        value = resolved(value)
    if opt.multiple and isinstance(value, str) and opt.name in PATH_VALUES:
        value = [value]  # [defaults] python = "..." is also `bisect worker`'s one --python
    if opt.multiple and isinstance(value, list) and opt.name in PATH_VALUES:
        value = [resolved(v) if isinstance(v, str) and "/" in v else v for v in value]
    if opt.multiple and not isinstance(value, list):
        raise UsageError(f"{where}: must be a list, e.g. [\"A=1\", \"B=2\"]")
    try:
        with click.Context(cmd) as ctx:
            opt.type_cast_value(ctx, value)
    except click.BadParameter as e:
        raise UsageError(f"{where}: {e.message}; fix the value or remove the key") from None
    return value


def _unknown(what: str, name: str, known: list[str], where: str) -> UsageError:
    # lazy: only a typo in a file needs a suggestion
    import difflib

    near = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {near[0]!r}?" if near else f"known: {', '.join(sorted(known))}"
    return UsageError(f"{where}: unknown {what} {name!r}; {hint}")


# Above ruff's limits on purpose: one branch per kind of configured value click can take.
def load(group: click.Group, found: list[ConfigFile]) -> Loaded:  # noqa: C901, PLR0912
    """Check every file against the commands and merge them into one ``default_map``; an
    untrusted file's keys outside :data:`INERT` are checked too, then ignored and named."""
    commands = _commands(group)
    loaded = Loaded(files=[f.path for f in found])
    for cf in found:
        path = cf.path
        ignored: list[str] = []
        if cf.link:
            loaded.links.add(path)
        data = read_toml(path, "fix it or remove it (set BISECTOR_CONFIG to use another file)",
                         cf.content)
        tables: list[tuple[tuple[str, ...], str, dict[str, Any]]] = []
        for name, value in data.items():
            if name in RESERVED:
                if not cf.trusted:
                    ignored.append(f"[{name}]")
                elif name == "artifacts" and path == user_config_file():
                    # Where wheels go is the user's choice alone (a repository's table is
                    # never read); its URL is checked now, before anything is stored.
                    loaded.artifacts = _artifacts(value, path)
                continue
            if name == ALL:
                if not isinstance(value, dict):
                    raise UsageError(f"{path}: [{ALL}] must be a table")
                for cmd_path in commands:
                    tables.append((cmd_path, ALL, value))
                known = {k for c in commands.values() for k in _options(c)}
                for key in value:
                    if key not in known:
                        raise _unknown("option", key, sorted(known), f"{path} [{ALL}]")
                continue
            _nested(commands, (name,), value, tables, path)
        # [defaults] first, so that a command's own table in the same file wins.
        tables.sort(key=lambda t: t[1] != ALL)
        for cmd_path, table, values in tables:
            cmd = commands[cmd_path]
            opts = _options(cmd)
            for key, value in values.items():
                if table == ALL and key not in opts:
                    continue  # [defaults] reaches only the commands that have the option
                if key not in opts and not opts and isinstance(cmd, click.Group):
                    subs = ", ".join(f"[{table}.{name}]" for name in sorted(cmd.commands))
                    raise UsageError(f"{path} [{table}] {key}: `bisect {' '.join(cmd_path)}` "
                                     f"takes no options, its commands do: put them in one of "
                                     f"{subs}")
                if key not in opts:
                    raise _unknown(f"option of `bisect {' '.join(cmd_path)}`", key,
                                   list(opts), f"{path} [{table}]")
                where = f"{path} [{table}] {key} = {value!r}"
                value = _check_value(cmd, opts[key], value, where, path.resolve().parent)
                if not cf.trusted and key not in INERT:
                    shown = f"[{table}] {key}"
                    if shown not in ignored:
                        ignored.append(shown)
                    continue
                node = loaded.default_map
                for part in cmd_path:
                    node = node.setdefault(part, {})
                name = opts[key].name
                assert name is not None
                node[name] = value
                loaded.sources[(" ".join(cmd_path), name)] = f"{path} [{table}]"
        if ignored:
            loaded.ignored[path] = ignored
    return loaded


def _artifacts(table: Any, path: Path) -> Address | None:
    """The user's ``[artifacts] url`` as a bucket (None: no URL), or a one-line error."""
    if not isinstance(table, dict) or not table.get("url"):
        return None
    url = table["url"]
    if not isinstance(url, str):
        raise UsageError(f"{path}: [artifacts] url must be a string s3://BUCKET/PREFIX")
    # lazy: only a user file with an object store loads its parser
    from bisector.artifacts.remote import parse

    return parse(url, f"{path} [artifacts] url")


def _nested(commands: dict[tuple[str, ...], click.Command], prefix: tuple[str, ...],
            value: Any, tables: list[tuple[tuple[str, ...], str, dict[str, Any]]],
            path: Path) -> None:
    """A command's table; a group's table holds its subcommands' tables (``[oracle.new]``)."""
    if prefix not in commands:
        names = [" ".join(p) for p in commands] + [ALL]
        raise _unknown("table", ".".join(prefix), names, str(path))
    if not isinstance(value, dict):
        raise UsageError(f"{path}: [{'.'.join(prefix)}] must be a table of options")
    own = {k: v for k, v in value.items() if not (isinstance(v, dict) and (*prefix, k)
                                                   in commands)}
    tables.append((prefix, ".".join(prefix), own))
    for k, v in value.items():
        if isinstance(v, dict) and (*prefix, k) in commands:
            _nested(commands, (*prefix, k), v, tables, path)


def _shown(opt: click.Option, value: Any) -> str:
    """A configured value as a user would type it: the flag for a boolean flag."""
    if opt.is_flag and isinstance(value, bool):
        if opt.secondary_opts:
            return (opt.opts if value else opt.secondary_opts)[0]
        return opt.opts[0] if value else "off"
    if isinstance(value, list):
        return " ".join(map(str, value))
    return str(value)


class ConfiguredCommand(click.Command):
    """Shows a configured default, and the file it came from, in ``--help``."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sources: dict[tuple[str, str], str] = ctx.meta.get(META_KEY, {})
        names, c = [], ctx
        while c.parent is not None:  # the root's name is however bisector was started
            names.append(c.info_name or "")
            c = c.parent
        path = " ".join(reversed(names))
        saved: list[tuple[click.Option, Any]] = []
        for p in self.params:
            if isinstance(p, click.Option) and p.name and (path, p.name) in sources:
                value = ctx.lookup_default(p.name, call=False)
                saved.append((p, p.show_default))
                p.show_default = f"{_shown(p, value)} from {sources[(path, p.name)]}"
        try:
            super().format_options(ctx, formatter)
        finally:
            for p, old in saved:
                p.show_default = old


class ConfiguredGroup(click.Group):
    """A group whose subcommands (and sub-groups) show configured defaults in ``--help``, and
    whose command list gives each command a whole sentence (cli/helptext.py), not click's
    first characters cut with ``...``."""

    command_class = ConfiguredCommand

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, summary(command)) for name, command in command_rows(self, ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


ConfiguredGroup.group_class = ConfiguredGroup
