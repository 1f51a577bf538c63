"""Issue 48, round 5, "reports as data": a HUD regression report (``bisect start|plan
--from-report``, a watch suite's reports folder) and a performance oracle's words are data.

- R1: a report nested past any real one, or holding a number no float holds, is one ``error:``
  line (the problem and the fix), a non-zero exit and an unchanged store, never a
  RecursionError or OverflowError traceback.
- R2: a range of more models than a probe can benchmark is refused in one line; the models of
  a range reach the benchmark reader through a file, never its arguments (the kernel caps one
  argument at 128 KiB: 50,000 models were a traceback and an interrupted bisection).
- R3: a report's text (its id, a series' names, its compiler, its policy) with newlines and
  escapes is printed as one line with its control characters visible, by ``start``, ``plan``
  and ``bisect tick``.
- E6: a performance oracle's unit ``"ms\\nFORGED LINE"`` writes no line of its own into
  ``bisect tick``, ``bisect watch``, ``bisect list``, a probe's line or ``bisect show``.

Real files, real git repositories, real oracle runs; the CLI through click's CliRunner.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.executors.oracle_run import run_oracle
from bisector.oracle.dashboard import oracle_of
from bisector.project.dashboard import parse
from bisector.store.db import open_store
from tests.support import (
    copy_world,
    git,
    installed_torchlet,
    invoke,
    one_line_error,
    run_cli,
    snapshot,
)

pytestmark = [pytest.mark.adversarial]

# What must never reach a terminal: ESC, BEL, C1 CSI, a lone CR, backspace, a bidi override.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
GOOD, BAD = "a" * 40, "b" * 40
DEEP = 40  # levels: past project/dashboard.MAX_DEPTH (32), far inside the interpreter's limit


def _result(model: str, **group: Any) -> dict[str, Any]:
    """One regressed series of a report: the baseline at GOOD, the flagged point at BAD."""
    return {"group_info": {"suite": "torchbench", "model": model, "metric": "speedup",
                           "compiler": "inductor", "device": "cuda", "dtype": "bfloat16",
                           "mode": "inference", **group},
            "all_baseline_points": [{"value": 1.0, "commit": GOOD}],
            "points": [{"value": 0.5, "commit": BAD, "flag": True}],
            "label": "regression",
            "policy": {"condition": "greater_equal", "threshold": 0.95}}


def _report(results: list[dict[str, Any]], **top: Any) -> dict[str, Any]:
    return {"report_id": "r5", **top, "report": {"results": results}}


def _repo(path: Path) -> Path:
    """A real repository with two commits (the reports name others: nothing may get that far)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "commit", "-q", "--allow-empty", "-m", "one")
    git(path, "commit", "-q", "--allow-empty", "-m", "two")
    return path


def _store(tmp_path: Path) -> Path:
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()
    return db


# -- R1: depth, size and number limits ------------------------------------------------------

def _deep_array() -> str:
    return "[" * 100_000 + "]" * 100_000


def _deep_results() -> str:
    nested: Any = 1
    for _ in range(DEEP):
        nested = {"x": nested}
    return json.dumps(_report([_result("resnet50", extra=nested)]))


def _huge_threshold() -> str:
    result = _result("resnet50")
    text = json.dumps(_report([result]))
    return text.replace('"threshold": 0.95', '"threshold": 1' + "0" * 4000)


def _huge_number() -> str:
    return json.dumps(_report([_result("resnet50")])).replace('"value": 1.0', '"value": '
                                                             + "9" * 5000)


@pytest.mark.parametrize(("make", "needle"), [
    (_deep_array, "the JSON nests deeper than 32 levels"),
    (_deep_results, "the JSON nests deeper than 32 levels"),
    (_huge_threshold, "the JSON holds a number of 4001 characters, over 40"),
    (_huge_number, "the JSON holds a number of 5000 characters, over 40"),
], ids=["deep-array", "deep-result", "huge-threshold", "huge-value"])
@pytest.mark.parametrize("command", ["start", "plan"])
def test_a_deep_or_huge_number_report_is_one_line(home: Path, tmp_path: Path, make: Any,
                                                  needle: str, command: str) -> None:
    repo = _repo(tmp_path / "repo")
    report = tmp_path / "report.json"
    report.write_text(make())
    db = _store(tmp_path)
    before = snapshot(db)
    r = invoke("--db", str(db), command, "--repo", str(repo), "--from-report", str(report))
    one_line_error(r, needle)
    assert "give the JSON of one" in r.stderr  # the fix, on the same line
    assert snapshot(db) == before


# -- R2: many models ------------------------------------------------------------------------

def test_a_report_of_too_many_models_is_one_line(home: Path, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    report = tmp_path / "report.json"
    report.write_text(json.dumps(_report([_result(f"model_{i:05d}") for i in range(50_000)])))
    db = _store(tmp_path)
    before = snapshot(db)
    r = invoke("--db", str(db), "start", "--repo", str(repo), "--python", sys.executable,
               "--offline", "--from-report", str(report))
    one_line_error(r, "has 50000 models, over 256")
    assert "keep the results of the models to bisect in the report" in r.stderr
    assert snapshot(db) == before


FAKE_BENCH = """\
import csv, os, sys
model, out = sys.argv[sys.argv.index("--only") + 1], sys.argv[sys.argv.index("--output") + 1]
with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:  # the reader's own arguments
    reader = f.read().split(b"\\0")
with open("seen.jsonl", "a") as f:
    f.write(__import__("json").dumps({"model": model, "reader": [a.decode() for a in reader]})
            + "\\n")
with open(out, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["dev", "name", "batch_size", "speedup"])
    w.writerow(["cuda", model, "1", "1.5"])
"""


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_the_models_reach_the_reader_through_a_file(home: Path, tmp_path: Path) -> None:
    models = [f"model_{i}_{'x' * 100}" for i in range(3)]
    (rng,) = parse(json.dumps(_report([_result(m) for m in models]))).ranges
    tree = tmp_path / "tree"
    (tree / "benchmarks" / "dynamo").mkdir(parents=True)
    (tree / "benchmarks" / "dynamo" / "torchbench.py").write_text(FAKE_BENCH)
    res = run_oracle(sys.executable, oracle_of(rng), BAD, tmp_path / "run", {}, cwd=tree)
    assert res.facts.get("perf", {}).get("samples") or "BISECTOR_RESULT" in res.output_tail, \
        res.output_tail
    seen = [json.loads(x) for x in (tree / "seen.jsonl").read_text().splitlines()]
    assert [s["model"] for s in seen] == models * 3  # every model, every round
    reader = seen[0]["reader"]
    assert not any(m in a for m in models for a in reader), reader  # none in its arguments
    at = next(a for a in reader if a.startswith("@"))
    assert Path(at[1:]).read_text().split() == models
    # The stored command still names them (the oracle's identity, the commands).
    assert ",".join(models) in oracle_of(rng).content.decode()


# -- R3: a report's text is one line of data ------------------------------------------------

FORGED = "\n\x1b[2J\x1b]52;c;ZXZpbA==\x07FORGED"


def _hostile_report() -> dict[str, Any]:
    return _report([
        _result("resnet50"),  # the one range
        _result("BERT", suite=f"torchbench{FORGED} suite line"),
        _result("BERT", compiler=f"eager{FORGED} compiler line"),
        {**_result("BERT"), "policy": {"condition": f"less{FORGED} condition line",
                                       "threshold": 0.95}},
        _result(f"BERT{FORGED} model line"),
    ], report_id=f"r5{FORGED} report line")


def _clean(text: str) -> None:
    assert not CONTROL.search(text.replace("\n", "")), text
    assert not [ln for ln in text.splitlines() if ln.lstrip().startswith("FORGED")], text


@pytest.mark.parametrize("command", ["start", "plan"])
def test_a_reports_text_is_printed_as_one_line_of_data(home: Path, tmp_path: Path,
                                                        command: str) -> None:
    repo = _repo(tmp_path / "repo")
    report = tmp_path / "report.json"
    report.write_text(json.dumps(_hostile_report()))
    r = invoke("--db", str(tmp_path / "b.db"), command, "--repo", str(repo), "--python",
               sys.executable, "--offline", "--from-report", str(report))
    assert "Traceback" not in r.stderr
    _clean(r.stdout + r.stderr)
    notes = [ln for ln in r.stderr.splitlines() if "not bisected:" in ln]
    assert len(notes) == 4, r.stderr  # each skipped series one line, its text shown
    assert any("not bisected: torchbench␊␛[2J␛]52;c;" in n for n in notes), notes
    if command == "start":
        assert "of report r5␊␛[2J" in r.stderr, r.stderr


def test_a_report_with_no_range_is_one_line_in_start_and_in_the_tick(home: Path,
                                                                    tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    doc = _hostile_report()
    doc["report"]["results"] = doc["report"]["results"][1:]  # no series bisector can run
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "hostile.json").write_text(json.dumps(doc))
    r = invoke("--db", str(tmp_path / "b.db"), "start", "--repo", str(repo), "--from-report",
               str(folder / "hostile.json"))
    one_line_error(r, "the report has no regressed series bisector can run")
    _clean(r.stderr)
    cfg = tmp_path / "watch.toml"
    cfg.write_text(f'[[suite]]\nname = "hud"\nrepo = "{repo}"\nreports = "{folder}"\n'
                   f'python = "{sys.executable}"\n')
    tick = invoke("--db", str(tmp_path / "t.db"), "tick", "--config", str(cfg))
    assert tick.exit_code == 0, tick.stderr
    assert "hud: hostile.json: the report has no regressed series" in tick.stderr
    _clean(tick.stdout + tick.stderr)


# -- E6: a performance oracle's unit --------------------------------------------------------

HOSTILE_UNIT = '''\
# /// script
# [tool.bisector]
# threshold = "20%"
# ///
import json
print("BISECTOR_RESULT " + json.dumps({"samples": [10.0, 10.1, 10.2],
                                       "unit": "ms\\nFORGED unit line \\x1b[2J",
                                       "metric": "t\\nFORGED metric line",
                                       "direction": "lower-is-better"}))
'''


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory,
              world: SyntheticHistory) -> tuple[SyntheticHistory, str]:
    """A copy of the world and a virtualenv with torchlet installed (an "installed" torch)."""
    base = tmp_path_factory.mktemp("installed")
    hist = copy_world(world, base / "repo")
    return hist, installed_torchlet(hist, base / "venv")


def test_an_oracles_unit_writes_no_line_into_tick_watch_or_list(
        home: Path, tmp_path: Path, installed: tuple[SyntheticHistory, str]) -> None:
    hist, python = installed
    oracle = tmp_path / "hostile_unit.py"
    oracle.write_text(HOSTILE_UNIT)
    cfg = tmp_path / "watch.toml"
    cfg.write_text(f'[[suite]]\nname = "box"\nrepo = "{hist.path}"\noracles = ["{oracle}"]\n'
                   f'torch = "installed"\npython = "{python}"\n')
    db = tmp_path / "w.db"
    tick = invoke("--db", str(db), "tick", "--config", str(cfg), "--no-bisect")
    assert tick.exit_code == 0, tick.stderr
    assert "hostile_unit: measured" in tick.stderr or "hostile_unit: good" in tick.stderr, \
        tick.stderr
    assert "ms␊FORGED unit line ␛[2J" in tick.stderr, tick.stderr  # shown, as data
    _clean(tick.stdout + tick.stderr)
    for args in (("watch",), ("watch", "--json"), ("list",)):
        r = invoke("--db", str(db), *args)
        assert r.exit_code == 0, r.stderr
        _clean(r.stdout + r.stderr)
    table = invoke("--db", str(db), "watch").stdout
    assert "ms␊FORGED unit line" in table, table
    # A bisection with it (the same samples at both ends: it stops at its endpoints): each
    # probe's line, then `bisect list` and `show` of it.
    r = run_cli("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                "--bad", hist.main[-1], "--oracle", str(oracle), "--no-confirm", "--python",
                sys.executable, "--offline")
    assert "Traceback" not in r.stderr and "median 10.1 ms␊FORGED unit line" in r.stderr, \
        r.stderr
    _clean(r.stdout + r.stderr)
    for args in (("list",), ("list", "--wide"), ("show", "last")):
        out = invoke("--db", str(db), *args)
        assert out.exit_code == 0, out.stderr
        _clean(out.stdout + out.stderr)


def test_a_unit_stored_before_writes_no_line_into_the_watch_table(tmp_path: Path) -> None:
    """Results a tick stored with the unit as the oracle printed it (before its runs' units
    were read as one line): the table still shows each cell on one line."""
    from bisector.infra.owner import owner_id
    from bisector.store import watch as ws

    db = tmp_path / "w.db"
    store, me = open_store(str(db)), owner_id()
    perf = {"samples": [10.0, 10.1, 10.2], "unit": "ms\nFORGED unit line",
            "metric": "t", "direction": "lower-is-better"}
    for day in ("01", "02", "03"):
        key = ws.ResultKey("nightly", "timer", f"2.9.0.dev202501{day}+cpu", "a" * 40)
        _, rec = ws.claim_result(store, key, source="index", git_version=None, me=me)
        assert ws.finish_result(store, rec.id, me, ws.Finding(
            "good", "pass", "median 10.1 ms\nFORGED reason line", 0, 0.1, "", "0" * 64,
            {"perf": perf}))
    for args in (("watch",), ("watch", "--json")):
        r = invoke("--db", str(db), *args)
        assert r.exit_code == 0, r.stderr
        _clean(r.stdout)
    assert "10.1 ms␊FORGED unit line" in invoke("--db", str(db), "watch").stdout
