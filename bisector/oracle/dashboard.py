"""The oracle of a dashboard regression: PyTorch's own benchmark script for the regressed models,
run from the probed commit's tree, its CSV read into samples.

The command is PyTorch's (``python benchmarks/dynamo/SUITE.py --performance --inference
--bfloat16 --backend inductor --device cuda --only MODEL --output CSV``), run through a short
inline reader: ``python -c READER COLUMN WAY RUNS MODELS -- COMMAND``. For each of RUNS rounds
the reader runs the command once per model (``{model}`` and ``{csv}`` filled in), reads the
column of the row it wrote, and keeps the geometric mean over the models as that round's
sample; then it prints ``BISECTOR_RESULT {"samples": ..., "direction": ...}``. A pass-rate
series (``WAY`` = ``pass``) is a correctness oracle instead: ``--accuracy``, bad when a model's
row does not say ``pass``. The document is an ordinary command oracle
(:func:`bisector.oracle.command.document`), named by the benchmark command, its threshold the
report's policy; the same series bisected again has the same hash, so it is found in the store.

MODELS (comma-separated) is part of the stored command, so it is part of the oracle's identity;
it never reaches the process's arguments, which the kernel caps (128 KiB an argument): a run
writes the models into a file of its run folder and hands the reader ``@FILE`` instead
(:func:`through_file`, called by ``executors/oracle_run``). A range holds at most
``project/dashboard.MAX_MODELS`` models.
"""

from __future__ import annotations

from pathlib import Path

from bisector.oracle.command import READER_MARK, command_oracle, reads_benchmark
from bisector.oracle.script import Oracle
from bisector.project.dashboard import DTYPES, METRICS, MODES, SUITES, Range

RUNS = 3  # samples a probe: one round of every model each
TIMEOUT_S = 3600.0  # a probe: RUNS rounds of every model, each compiling it first

READER = READER_MARK + """
import csv, json, math, os, subprocess, sys, tempfile
column, way, runs, models = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
models = open(models[1:]).read().split() if models.startswith('@') else models.split(',')
cmd = sys.argv[sys.argv.index('--') + 1:]
samples = []
for _ in range(runs):
    values = []
    for model in models:
        out = os.path.join(tempfile.mkdtemp(), 'bench.csv')
        argv = [a.replace('{model}', model).replace('{csv}', out) for a in cmd]
        code = subprocess.run(argv).returncode
        rows = list(csv.DictReader(open(out))) if os.path.exists(out) else []
        row = next((r for r in rows if r.get('name') == model), None)
        if row is None or code != 0:
            print(f'{model}: the benchmark wrote no row (exit {code})')
            sys.exit(125)
        if way == 'pass':
            if row.get(column) != 'pass':
                print(f'{model}: accuracy {row.get(column)}')
                sys.exit(1)
            continue
        values.append(float(row[column]))
    if way == 'pass':
        break
    samples.append(math.exp(sum(math.log(max(v, 1e-12)) for v in values) / len(values)))
    print(f'{column} over {len(models)} model(s): {samples[-1]:.4g}')
if way != 'pass':
    print('BISECTOR_RESULT ' + json.dumps({'samples': samples, 'unit': column,
                                           'direction': way, 'metric': column}))
"""


def command(r: Range) -> tuple[str, ...]:
    """The oracle's argv for one range: the reader, then PyTorch's benchmark command."""
    column, way = METRICS[r.metric]
    script = f"benchmarks/dynamo/{SUITES[r.suite]}.py"
    bench = ("python", script, "--accuracy" if way == "pass" else "--performance",
             MODES[r.mode], DTYPES[r.dtype],
             "--backend", "inductor", "--device", r.device, "--only", "{model}",
             "--output", "{csv}")
    return ("python", "-c", READER, column, way, str(RUNS), ",".join(r.models), "--", *bench)


MODELS_AT = 6  # the index of MODELS in the argv of :func:`command`


def through_file(argv: list[str], folder: Path) -> list[str]:
    """The argv to execute for ``argv``: a dashboard oracle's models written into
    ``folder/models.txt`` (one a line) and given as ``@FILE``; any other argv (an older
    reader's too, which reads them from its arguments) as it is."""
    if len(argv) <= MODELS_AT or argv[:3] != ["python", "-c", READER] \
            or argv[MODELS_AT].startswith("@"):
        return argv
    models = folder.resolve() / "models.txt"  # the reader runs in the probed tree
    models.write_text("".join(f"{m}\n" for m in argv[MODELS_AT].split(",")))
    return [*argv[:MODELS_AT], f"@{models}", *argv[MODELS_AT + 1:]]


def benchmark_runs(argv: tuple[str, ...] | None) -> tuple[int, int] | None:
    """(models, rounds) that one run of a dashboard oracle benchmarks: every model of its range
    once a round, :data:`RUNS` rounds (one for a pass rate: it stops after its first); None
    for any other oracle. What ``bisect plan`` prices an oracle with before it has run."""
    if argv is None or not reads_benchmark(argv) or len(argv) <= MODELS_AT:
        return None
    way, rounds, models = argv[4], argv[5], argv[MODELS_AT]
    if not rounds.isdigit() or models.startswith("@"):
        return None
    return len([m for m in models.split(",") if m]), 1 if way == "pass" else int(rounds)


def threshold(r: Range) -> str | None:
    """The report policy's allowed change as a threshold ("5%"); none for a pass rate."""
    if METRICS[r.metric][1] == "pass":
        return None
    return f"{100 * r.threshold:g}%"


def oracle_of(r: Range) -> Oracle:
    return command_oracle(command(r), timeout=TIMEOUT_S, threshold=threshold(r))
