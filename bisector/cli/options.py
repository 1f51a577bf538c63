"""The options of `start`, `plan` and `check`: one per field of bisector.run.request.Request (and
CheckRequest), same names, each declared once here."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
from click.shell_completion import CompletionItem

from bisector.base import defaults
from bisector.base.kinds import BuildPlace, ExecutorKind, Polarity, PriorMode
from bisector.cli import complete

# -- numbers and names a user types: checked here, once, before anything is opened ------------

class Whole(click.ParamType[int]):
    """A whole number from ``low`` to ``high``. Unbounded, ``--jobs 99999999999999999999``
    made a list that size (a traceback, after the bisection was stored) and an id past
    PostgreSQL's INTEGER a 500 in ``bisect serve``."""

    name = "integer"

    def __init__(self, low: int, high: int, what: str = "a number", hint: str = "") -> None:
        self.low, self.high, self.what, self.hint = low, high, what, hint

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        try:
            n = value if isinstance(value, int) and not isinstance(value, bool) else \
                int(str(value).strip())
        except ValueError:
            self.fail(f"{str(value)[:40]!r} is not a valid integer: give {self.span()}",
                      param, ctx)
        if not self.low <= n <= self.high:
            self.fail(f"{str(n)[:40]} is out of range: give {self.span()}", param, ctx)
        return n

    def span(self) -> str:
        return f"{self.what} from {self.low} to {self.high}{self.hint}"


class Seconds(click.ParamType[float]):
    """Seconds above 0, finite and at most ``defaults.MAX_SECONDS``: ``nan`` compares false
    with everything, so a ``nan`` timeout was no timeout at all, and ``inf`` the same."""

    name = "seconds"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        try:
            x = float(value)
        except (TypeError, ValueError, OverflowError):
            self.fail(f"{str(value)[:40]!r} is not a number of seconds", param, ctx)
        if not (math.isfinite(x) and 0 < x <= defaults.MAX_SECONDS):
            what = "is out of range" if math.isfinite(x) else "is not a finite number"
            self.fail(f"{str(value)[:40]} {what}: give seconds above 0 and at most "
                      f"{defaults.MAX_SECONDS:.0f} (30 days)", param, ctx)
        return x


class Variant(click.ParamType[str]):
    """A wheel variant such as cu128, cu126, cpu or rocm6.3 (a PEP 440 local version label,
    :data:`bisector.run.request.VARIANT`): anything else matched no wheel (a silent "no
    prebuilt wheels") or went into the index URL as a path."""

    name = "variant"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> str:
        # lazy: the request's module (its checks import the core) is for a command that runs
        from bisector.run.request import VARIANT

        text = str(value)
        if not (len(text) <= 40 and VARIANT.fullmatch(text)):
            self.fail(f"{text[:40]!r} is not a wheel variant: write one like cu128, cu126, "
                      f"cpu or rocm6.3 (lower case letters and digits, dots between)",
                      param, ctx)
        return text


LAST = 0  # `last` (or no id): the store's newest bisection, resolved when the store is open


class BisectionId(Whole):
    """A bisection id; TAB offers the store's newest ones."""

    def __init__(self, hint: str = "; `bisect list` shows them") -> None:
        super().__init__(1, defaults.MAX_ID, "a bisection id", hint)

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[CompletionItem]:
        return complete.bisection_ids(ctx, incomplete, last=False)


class BisectionRef(BisectionId):
    """A bisection id, or ``last``: what a person means right after a bisection."""

    def __init__(self) -> None:
        super().__init__(", or last; `bisect list` shows them")

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, str) and value.strip().lower() == "last":
            return LAST
        return super().convert(value, param, ctx)

    def shell_complete(self, ctx: click.Context, param: click.Parameter,
                       incomplete: str) -> list[CompletionItem]:
        return complete.bisection_ids(ctx, incomplete, last=True)


BISECTION_ID = BisectionId()
BISECTION_REF = BisectionRef()
JOBS = Whole(1, defaults.MAX_JOBS)
SECONDS = Seconds()

RANGE_OPTIONS = [
    click.option("--repo", default=".", show_default=True, type=click.Path(path_type=Path),
                 help="Path of the git clone."),
    click.option("--repo-url", default="", metavar="URL", help="Where workers clone the "
                 "repository from, each its own mirror (default: the clone's origin)."),
    click.option("--good", default=None, shell_complete=complete.refs,
                 help="A ref where the oracle passes (tag, branch, sha)."),
    click.option("--bad", default=None, shell_complete=complete.refs,
                 help="A ref where the oracle fails."),
    click.option("--oracle", default=None, shell_complete=complete.oracles,
                 help="Oracle name from `bisect oracles`, or a path; or give a command after "
                 "-- instead (run in the commit's tree, like git bisect run)."),
    click.option("--match", default=None, metavar="REGEX", help="The failure that is the bug: "
                 "a run that would be bad but whose output does not match REGEX is a skip "
                 "(\"a different failure\"). Overrides the oracle's own `match`."),
    click.option("--any-failure", is_flag=True, help="Every failure is bad, as git bisect "
                 "run has it. Default: a probe that fails unlike the bad endpoint (another "
                 "exception or message, numbers, paths and addresses aside) is a skip, "
                 "\"fails differently\"."),
    click.option("--timeout", type=SECONDS, default=None, metavar="SECONDS",
                 help=f"A command oracle's timeout (default {defaults.ORACLE_TIMEOUT_S:.0f})."),
    click.option("--threshold", default=None, metavar="PCT", help="A command oracle is a "
                 "performance oracle: it prints BISECTOR_RESULT samples, and a commit is bad "
                 "when worse than the good endpoint by more than PCT (e.g. 5%%)."),
    click.option("--dependency", multiple=True, metavar="REQ", help="A requirement the "
                 "command oracle needs in the probed environment, e.g. pytest (repeatable)."),
    click.option("--env", "env", multiple=True, metavar="NAME=VALUE", help="A variable for "
                 "every oracle run, e.g. TORCH_LOGS=recompiles (repeatable). With the "
                 "TORCH_*, TORCHINDUCTOR_*, TORCHDYNAMO_*, TRITON_*, CUDA_* and PYTORCH_* "
                 "variables a local run inherits, it is recorded, keys the verdicts and is "
                 "in the reproduce line."),
    click.option("--find-fix", is_flag=True, help="Look for the first commit that fixed it: "
                 "--good is the older broken ref, --bad the newer fixed one."),
    click.option("--regress", type=click.Choice([p.value for p in Polarity]), default=None,
                 help="What counts as regressed: the oracle failing (default) or succeeding "
                 "(seed-style repro scripts that exit 0 when the bug reproduces)."),
    click.option("--ancestry-path", is_flag=True, help="Walk every commit on the ancestry "
                 "path instead of first-parent."),
    click.option("--into-merge/--no-into-merge", default=True, show_default=True,
                 help="When the first-parent culprit is a merge, go on among the commits it "
                 "brings and name the one that did it beside the merge (deterministic "
                 "oracles); --no-into-merge stops at the merge."),
    click.option("--compiler-bisect/--no-compiler-bisect", default=True, show_default=True,
                 help="When the culprit's failure is a torch.compile one, run torch's "
                 "compiler bisector there with the same oracle (python -m "
                 "torch._inductor.compiler_bisector run ...) and report the backend, "
                 "subsystem and pass or lowering at fault."),
    click.option("--path", "path", multiple=True, metavar="PATH", help="Only commits "
                 "touching PATH are candidates (repeatable), as git bisect start -- PATHS; "
                 "the report says how many of the range's commits that leaves."),
    click.option("--skip", "skip", multiple=True, metavar="REF|A..B", help="Commits known "
                 "untestable up front (repeatable), as git bisect skip: never probed, and a "
                 "culprit among them is answered with every commit it could be."),
    click.option("--term-old", default=None, metavar="WORD", help="The word for the old "
                 "behaviour in every output (with --term-new), as git bisect --term-old."),
    click.option("--term-new", default=None, metavar="WORD", help="The word for the new "
                 "behaviour (the one sought), as git bisect --term-new."),
    click.option("--profile", default=None,
                 help="Project profile: pytorch, torchlet, generic, or tree (build nothing: "
                 "the oracle runs in each commit's tree) (default: detected from the bad "
                 "commit; tree when it has no pyproject.toml, setup.py or setup.cfg)."),
    click.option("--python", "python", default=None,
                 help="Interpreter for builds and probe environments (default: the first "
                 "python3, then python, on PATH that imports the profile's package)."),
    click.option("--offline", is_flag=True,
                 help="No index at all: uv uses its cache, no prebuilt wheels are listed."),
    click.option("--build-timeout", type=SECONDS, default=defaults.BUILD_TIMEOUT_S,
                 show_default=True,
                 help="Seconds per build."),
    click.option("--prebuilt/--no-prebuilt", default=True, show_default=True,
                 help="Use prebuilt wheels, and overlays on them and on wheels built from source "
                 "(--no-prebuilt: build every "
                 "probe)."),
    click.option("--nightly-index", default=None, metavar="URL",
                 help="Simple index of nightly wheels (default: the profile's, e.g. "
                 "PyTorch's whl/nightly/<variant>); '' turns nightlies off."),
    click.option("--release-index", default=None, metavar="URL",
                 help="Simple index of release wheels (default for PyTorch: the index pip/uv "
                 "are configured with)."),
    click.option("--variant", type=Variant(), default=None, help="Wheel variant: cu128, "
                 "cu126, cpu ... (default: the profile's)."),
    click.option("--executor", type=click.Choice([e.value for e in ExecutorKind]), default="local",
                 show_default=True, help="Where oracles run: a local uv virtualenv, or one "
                 "container per probe of the runtime image."),
    click.option("--image", default=None, help=f"Runtime image for --executor docker "
                 f"(default {defaults.RUNTIME_IMAGE}, from `make images`)."),
    click.option("--gpus", default=None, metavar="all|0,1,...", help="GPUs the probes use: "
                 "with a list, one probe runs per GPU at once (CUDA_VISIBLE_DEVICES locally, "
                 "one device request per container); all: every probe sees every GPU."),
    click.option("--gpu-model", default=None, metavar="NAME", help="The GPU model the probes "
                 "run on, as nvidia-smi names it (\"NVIDIA H200\"): for a bisection started on "
                 "a box without that GPU whose probes go to workers that have it (default: this "
                 "box's GPUs)."),
    click.option("--jobs", type=JOBS, default=None, help="Probes at once (default: one per "
                 "GPU of --gpus, else 1). Each round the search picks that many split points."),
    click.option("--build-jobs", type=JOBS, default=defaults.BUILD_JOBS, show_default=True,
                 help="Source builds at once."),
    click.option("--prefetch", type=click.IntRange(min=0), default=None, metavar="N",
                 help="Commits the next round may probe made ready while the oracle runs "
                 "(download, overlay, environment; a source build only when it pays), at most "
                 f"N at once (default: {defaults.PREFETCH_PER_SLOT} per probe at once); 0: "
                 "none."),
    click.option("--manual", is_flag=True, help="Judge each probe yourself, as git bisect "
                 "good/bad: bisector prepares the commit's environment and tree, prints a "
                 "command that opens a shell there, and asks whether the bug shows."),
    click.option("--prior", type=click.Choice([p.value for p in PriorMode]), default="auto",
                 show_default=True, help="auto: once the bad endpoint has failed, probe "
                 "where its traceback points first (commits that changed the files and "
                 "functions it names, or that a command oracle names), never beyond "
                 "ceil(log2 n) + 2 probes; plain bisection when it names nothing. none: "
                 "plain bisection."),
    click.option("--confirm/--no-confirm", default=True, show_default=True,
                 help="Before answering, run the culprit and its parent again and, where "
                 "git revert applies cleanly onto --bad, the revert (expected good)."),
    click.option("--reconfirm", is_flag=True, help="Run the confirmation again even where "
                 "this culprit was confirmed before with the same oracle and environment "
                 "(otherwise that confirmation is reused: 0 new runs)."),
    click.option("--memory", default=defaults.MEMORY, show_default=True,
                 help="Memory limit of each oracle container."),
    click.option("--pids", type=Whole(1, defaults.MAX_PIDS), default=defaults.PIDS,
                 show_default=True,
                 help="Process limit of each oracle container."),
    click.option("--build-in", type=click.Choice([b.value for b in BuildPlace]), default=None,
                 help="Where source builds run: this machine, or the builder image with a "
                 "ccache volume per repository (default: docker with --executor docker)."),
    click.option("--builder-image", default=None, help=f"Builder image for --build-in docker "
                 f"(default {defaults.BUILDER_IMAGE}, from `make images`)."),
    click.option("--cuda-arch", default=None, metavar="LIST", help="TORCH_CUDA_ARCH_LIST for "
                 "source builds (default: the GPUs of --gpus / this machine, else 8.0;8.6;9.0)."),
    click.option("--max-jobs", type=JOBS, default=None,
                 help="MAX_JOBS for source builds (default: all cores)."),
    click.option("--build-env", multiple=True, metavar="NAME=VALUE", help="Override a build "
                 "variable of the profile, e.g. USE_DISTRIBUTED=1 (part of the build's key)."),
    click.option("--installed-base", default=None, metavar="REF", shell_complete=complete.refs,
                 help="The torch installed for --python was built from REF: use it as the "
                 "prebuilt base for overlays (a GPU box with no index)."),
]


# `start` only: a `git bisect log` whose marks seed the bisection (run/from_log.py).
FROM_LOG = click.option(
    "--from-log", type=click.Path(path_type=Path, dir_okay=False), default=None,
    metavar="FILE", help="Seed the bisection with the marks of a git bisect log (git's, or "
    "bisect log's): they become verdicts judged by hand, the range is the log's unless "
    "--good/--bad are given, and the search goes on with the oracle, a command or --manual.")


FROM_REPORT = click.option(
    "--from-report", default=None, metavar="FILE|-", help="A HUD benchmark regression "
    "report's JSON (- for standard input): one bisection per regressed range and metric, "
    "its oracle PyTorch's benchmark script for the regressed models (benchmarks/dynamo/"
    "SUITE.py --performance --only MODEL), its threshold the report's policy; --repo is the "
    "PyTorch clone. A range already bisected in the store is named, not run again.")


def _name(option: Any) -> str:
    """The parameter name an option decorator declares (applied to a throwaway function)."""
    def probe() -> None: ...
    option(probe)
    return str(probe.__click_params__[-1].name)  # type: ignore[attr-defined]


OPTION: dict[str, Any] = {_name(o): o for o in RANGE_OPTIONS}
# What one run of `bisect check` shares with `start`: the oracle and how it judges, the clone.
CHECK_OPTIONS = [OPTION[n] for n in ("oracle", "repo", "profile", "python", "regress", "match",
                                     "timeout", "dependency")]

COMMAND_ARGUMENT = click.argument("command", nargs=-1, type=click.UNPROCESSED,
                                  metavar="[-- CMD [ARGS]...]")


def check_options(f: Any) -> Any:
    for opt in reversed(CHECK_OPTIONS):
        f = opt(f)
    return COMMAND_ARGUMENT(f)


def range_options(f: Any) -> Any:
    for opt in reversed(RANGE_OPTIONS):
        f = opt(f)
    return COMMAND_ARGUMENT(f)
