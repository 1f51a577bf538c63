"""Issue 20, class 10: tracebacks and silently accepted nonsense.

Every input below gets one ``error:`` line naming the problem and the fix, a non-zero exit,
and leaves the store as it was (nothing created where there was none); every number read from
a user is finite and in range (cli/options.py's types, Request.check, the watch's config).
``oracle new --from-repro`` never imports a same-named folder of the current directory in
place of the package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, text
from starlette.testclient import TestClient

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.store.db import open_store
from bisector.web.server import create_app
from tests.support import invoke, one_line_error, snapshot

pytestmark = [pytest.mark.adversarial]

HUGE_IDS = [str(2**31), str(2**63 - 1), str(2**63), "9" * 40]


def _pg_dump(url: str) -> dict[str, list[Any]]:
    """Every row of every table of a PostgreSQL store, in a stable order."""
    engine = create_engine(url)
    try:
        with engine.connect() as con:
            out = {}
            for table in sorted(inspect(con).get_table_names()):
                rows = con.execute(text(f'SELECT * FROM "{table}"')).fetchall()
                out[table] = sorted(repr(tuple(r)) for r in rows)
            return out
    finally:
        engine.dispose()


@pytest.mark.parametrize("command", ["show", "log", "cancel", "resume"])
def test_ids_past_postgresqls_integer_are_one_line(home: Path, pg_url: str,
                                                   command: str) -> None:
    open_store(pg_url).engine.dispose()
    before = _pg_dump(pg_url)
    for value in HUGE_IDS:
        r = invoke("--db", pg_url, command, value)
        one_line_error(r, "bisection id")
        assert "2147483647" in r.stderr
    assert _pg_dump(pg_url) == before


def test_the_web_view_answers_404_for_ids_past_postgresqls_integer(home: Path,
                                                                   pg_url: str) -> None:
    store = open_store(pg_url)
    before = _pg_dump(pg_url)
    with TestClient(create_app(store), raise_server_exceptions=False) as client:
        for value in HUGE_IDS[:3]:
            for path in (f"/bisections/{value}", f"/bisections/{value}/report.md",
                         f"/bisections/{value}/report.html",
                         f"/bisections/{value}/probes/1/stdout", f"/api/bisections/{value}",
                         f"/api/bisections/{value}/log"):
                assert client.get(path).status_code == 404, path
    assert _pg_dump(pg_url) == before


def _start(db: Path, hist: SyntheticHistory, *extra: str) -> Any:
    return invoke("--db", str(db), "start", "--repo", str(hist.path), "--good", hist.main[0],
                  "--bad", hist.main[-1], "--oracle", "torchlet_norm", *extra)


@pytest.mark.parametrize(("extra", "needle"), [
    (["--jobs", "99999999999999999999"], "--jobs"),
    (["--build-jobs", "99999999999999999999"], "--build-jobs"),
    (["--max-jobs", "99999999999999999999"], "--max-jobs"),
    (["--pids", "99999999999999999999"], "--pids"),
    (["--build-timeout", "nan"], "--build-timeout"),
    (["--build-timeout", "inf"], "--build-timeout"),
    (["--build-timeout", "1e400"], "--build-timeout"),
    (["--variant", "../../simple"], "not a wheel variant"),
    (["--variant", "CU128"], "not a wheel variant"),
    (["--variant", "cu 128"], "not a wheel variant"),
])
def test_start_refuses_numbers_out_of_range_and_bad_variants(
        home: Path, tmp_path: Path, world: SyntheticHistory, extra: list[str],
        needle: str) -> None:
    db = tmp_path / "b.db"
    one_line_error(_start(db, world, *extra), needle)
    assert not db.exists()  # nothing created
    open_store(str(db)).engine.dispose()
    before = snapshot(db)
    one_line_error(_start(db, world, *extra), needle)
    assert snapshot(db) == before


@pytest.mark.parametrize("cost", ["oracle=nan", "build=inf", "cached=1e400", "overlay=-1"])
def test_plan_refuses_a_cost_that_is_not_finite(home: Path, tmp_path: Path,
                                                world: SyntheticHistory, cost: str) -> None:
    db = tmp_path / "b.db"
    r = invoke("--db", str(db), "plan", "--repo", str(world.path), "--good", world.main[0],
               "--bad", world.main[-1], "--oracle", "torchlet_norm", "--cost", cost)
    one_line_error(r, "--cost")
    assert not db.exists()


def test_a_listing_limit_out_of_range_is_one_line(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()
    before = snapshot(db)
    one_line_error(invoke("--db", str(db), "list", "--limit", "9" * 30), "--limit")
    assert snapshot(db) == before


def test_gc_max_size_with_400_digits_is_one_line(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    open_store(str(db)).engine.dispose()
    before = snapshot(db)
    for args in (["--max-size", "1" + "0" * 400], ["--max-size", "9" * 400 + "G"],
                 ["--older-than", "9" * 400 + "d"]):
        r = invoke("--db", str(db), "gc", "--dry-run", *args)
        one_line_error(r, args[0])
    assert snapshot(db) == before


def test_a_cron_schedule_that_never_fires_is_one_line(home: Path, tmp_path: Path) -> None:
    db = tmp_path / "b.db"
    r = invoke("--db", str(db), "tick", "--every", "0 0 31 2 *", cwd=tmp_path)
    one_line_error(r, "never fires")
    assert not db.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400"])
def test_a_notify_timeout_that_is_not_finite_is_one_line(home: Path, tmp_path: Path,
                                                         value: str) -> None:
    config = tmp_path / "watch.toml"
    config.write_text(f'[notify]\ncommand = "true"\ntimeout = {value}\n')
    db = tmp_path / "b.db"
    r = invoke("--db", str(db), "tick", "--config", str(config), cwd=tmp_path)
    one_line_error(r, "[notify] timeout")
    assert not db.exists()


def test_a_suite_bisect_build_timeout_of_nan_is_refused(home: Path, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    config = tmp_path / "watch.toml"
    config.write_text('[[suite]]\nname = "cpu"\nrepo = "repo"\noracles = ["torchlet_norm"]\n'
                      '[suite.bisect]\nbuild-timeout = nan\n')
    db = tmp_path / "b.db"
    r = invoke("--db", str(db), "tick", "--config", str(config), cwd=tmp_path)
    one_line_error(r, "--build-timeout")
    assert not db.exists()


def test_oracle_new_refuses_a_repro_that_is_not_utf8(home: Path, tmp_path: Path) -> None:
    repro = tmp_path / "repro.py"
    repro.write_bytes(b"# caf\xe9\nimport sys\nsys.exit(1)\n")
    out = tmp_path / "oracles"
    r = invoke("oracle", "new", "latin", "--from-repro", str(repro), "--dir", str(out),
               "--no-run", cwd=tmp_path)
    one_line_error(r, "not UTF-8")
    assert not out.exists()


@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_oracle_new_refuses_a_timeout_that_is_not_finite(home: Path, tmp_path: Path,
                                                         value: str) -> None:
    repro = tmp_path / "repro.py"
    repro.write_text("import sys\nsys.exit(1)\n")
    out = tmp_path / "oracles"
    r = invoke("oracle", "new", "t", "--from-repro", str(repro), "--dir", str(out),
               "--no-run", "--timeout", value, cwd=tmp_path)
    one_line_error(r, "--timeout")
    assert not out.exists()


def test_oracle_new_does_not_import_a_same_named_folder_of_the_current_directory(
        home: Path, tmp_path: Path) -> None:
    """The repro imports a package that is installed in --python's environment, and the
    current folder (where the repro lies, a source checkout) holds a folder of that name. The
    signature must come from the installed package's failure, not the folder's."""
    venv = tmp_path / "venv"
    subprocess.run([os.path.realpath(sys.executable), "-m", "venv", "--without-pip",
                    str(venv)], check=True)
    py = venv / "bin" / "python"
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "shadowpkg").mkdir()
    (site / "shadowpkg" / "__init__.py").write_text(
        "def run():\n    raise ValueError('the installed package has the bug')\n")
    work = tmp_path / "checkout"
    (work / "shadowpkg").mkdir(parents=True)
    (work / "shadowpkg" / "__init__.py").write_text(
        "def run():\n    raise RuntimeError('the checkout folder, not the package')\n")
    (work / "repro.py").write_text("import shadowpkg\nshadowpkg.run()\n")
    out = tmp_path / "oracles"
    r = invoke("oracle", "new", "shadow", "--from-repro", "repro.py", "--dir", str(out),
               "--python", str(py), cwd=work)
    assert r.exit_code == 0, r.stderr
    written = (out / "shadow.py").read_text()
    assert '# match = "ValueError: the installed package has the bug"' in written, r.stdout
    assert "checkout folder" not in written.split("REPRO = ")[0]


def test_one_line_for_every_click_usage_error(home: Path, tmp_path: Path) -> None:
    r = invoke("--db", str(tmp_path / "b.db"), "show", "abc")
    one_line_error(r, "not a valid integer")
    r = invoke("--db", str(tmp_path / "b.db"), "show", "1", "--format", "pdf", "--json")
    assert r.exit_code != 0
    assert json.loads(r.stdout)["error"]["kind"] == "BadParameter"
    assert not (tmp_path / "b.db").exists()


def test_a_huge_bisect_log_is_refused_at_once_and_a_long_one_is_read_in_one_go(
        home: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    """Issue 32, item 7: a 4 MiB ``--from-log`` ran silently for about 10 minutes (a git
    process per mark, and one per pair of marks): more marks than any search makes are one
    line at once, and a long real log is resolved by one git process."""
    import time

    from bisector.project import bisect_log
    from bisector.project.history import open_repo

    huge = tmp_path / "huge.log"
    huge.write_text(f"git bisect start {world.main[-1]} {world.main[0]}\n"
                    + f"git bisect good {world.main[1]}\n" * (bisect_log.MAX_MARKS + 1))
    start = time.monotonic()
    one_line_error(invoke("--db", str(home / "b.db"), "start", "--repo", str(world.path),
                          "--from-log", str(huge), "--manual"), "more than 2000 marks")
    assert time.monotonic() - start < 20
    assert not (home / "b.db").exists()
    long = bisect_log.parse(f"git bisect start {world.main[-1]} {world.main[0]}\n"
                            + "".join(f"git bisect skip {sha}\n" for sha in world.main[1:-1]))
    start = time.monotonic()
    marks = bisect_log.resolve(open_repo(str(world.path)), long)
    assert [m.sha for m in marks][2:] == list(world.main[1:-1])
    assert time.monotonic() - start < 10


@pytest.mark.parametrize(("make", "extra", "needle"), [
    ("dir", (), "is a folder"),
    ("zero", (), "not a regular file"),
    ("urandom", ("--traceback", "/dev/urandom"), "not a regular file"),
    ("dirfile", (), "is a file, not a folder"),
    ("proc", (), "cannot write"),
])
def test_oracle_new_says_what_is_wrong_with_its_inputs(home: Path, tmp_path: Path, make: str,
                                                       extra: tuple[str, ...],
                                                       needle: str) -> None:
    """Issue 32, item 8: a folder, /dev/zero or /dev/urandom "does not exist"; --dir naming
    a file or /proc/1 printed tracebacks."""
    repro = tmp_path / "repro.py"
    repro.write_text("import sys\nsys.exit(1)\n")
    out = tmp_path / "oracles"
    if make == "dir":
        repro = tmp_path / "a-folder"
        repro.mkdir()
    elif make == "zero":
        repro = Path("/dev/zero")
    elif make == "dirfile":
        out.write_text("a file\n")
    elif make == "proc":
        out = Path("/proc/1")
    r = invoke("oracle", "new", "t", "--from-repro", str(repro), "--dir", str(out),
               "--no-run", *extra, cwd=tmp_path)
    one_line_error(r, needle)


def test_oracle_new_reads_a_repro_with_a_byte_order_mark(home: Path, tmp_path: Path) -> None:
    repro = tmp_path / "repro.py"
    repro.write_bytes(b"\xef\xbb\xbfimport sys\nsys.exit(1)\n")
    out = tmp_path / "oracles"
    r = invoke("oracle", "new", "bom", "--from-repro", str(repro), "--dir", str(out),
               "--no-run", cwd=tmp_path)
    assert r.exit_code == 0, r.stderr
    assert (out / "bom.py").is_file()


def test_serve_on_any_host_checks_the_host_header(home: Path, tmp_path: Path) -> None:
    """Issue 32, item 8: ``serve --host 127.0.0.2`` (any host but the default) had no Host
    check, so a DNS rebinding page read the store."""
    from bisector.web.server import bound_names

    store = open_store(str(tmp_path / "s.db"), create=True)
    for host in ("127.0.0.2", "0.0.0.0"):
        client = TestClient(create_app(store, bound_names(host)))
        assert client.get("/", headers={"Host": "rebound.example"}).status_code == 400
    assert TestClient(create_app(store, bound_names("127.0.0.2"))).get(
        "/", headers={"Host": "127.0.0.2:8000"}).status_code == 200


def test_serve_says_in_one_line_that_it_cannot_listen(home: Path, tmp_path: Path) -> None:
    """Issue 32, item 8: a busy port printed "serving ..." then uvicorn's [Errno 98]; a host
    that does not resolve printed a raw resolver error."""
    import socket

    db = tmp_path / "s.db"
    open_store(str(db), create=True)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        r = invoke("--db", str(db), "serve", "--port", port)
        one_line_error(r, "cannot listen there")
        assert "serving" not in r.stderr
    one_line_error(invoke("--db", str(db), "serve", "--host", "no-such-host.invalid"),
                   "cannot be resolved")


def test_find_fix_with_the_refs_the_wrong_way_says_so(home: Path,
                                                      world: SyntheticHistory) -> None:
    """Issue 32, item 9: ``--find-fix --bad OLD --good NEW`` was told to "swap the refs and
    pass --find-fix" although it was passed."""
    r = invoke("--db", str(home / "b.db"), "start", "--repo", str(world.path), "--find-fix",
               "--bad", world.main[0], "--good", world.main[-1], "--oracle", "torchlet_norm")
    one_line_error(r, "with --find-fix, --good is the older, broken ref")
    assert "pass --find-fix" not in r.stderr


def test_a_command_oracle_outside_the_tree_is_taken_from_where_the_user_stands(
        home: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    """Issue 32, item 9: ``-- python ../x.py`` (which works in git bisect run) ran in each
    commit's tree, where ``../x.py`` names nothing: "good is already bad"."""
    from tests.support import copy_world, run_cli

    hist = copy_world(world, tmp_path / "clone" / "repo")
    (tmp_path / "clone" / "judge.py").write_text(
        "import sys, torchlet\nsys.exit(0 if abs(torchlet.norm([3.0, 4.0]) - 5.0) < 1e-9 "
        "else 1)\n")
    r = run_cli("--db", str(home / "b.db"), "start", "--repo", ".", "--good", hist.main[0],
                "--bad", hist.main[-1], "--no-confirm", "--json", "--", "python",
                "../judge.py", cwd=hist.path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["culprit"]["sha"] == hist.culprit
    one_line_error(invoke("--db", str(home / "b.db"), "start", "--repo", ".", "--good",
                          hist.main[0], "--bad", hist.main[-1], "--", "python", "../nope.py",
                          cwd=hist.path), "no such file from here")


def test_an_oracle_missing_a_module_is_not_told_to_pick_an_older_good(
        home: Path, world: SyntheticHistory, tmp_path: Path) -> None:
    """Issue 32, item 9: a program or module the oracle needs, missing here, was reported as
    "good is already bad ... pick an older --good"."""
    oracle = tmp_path / "needs.py"
    oracle.write_text("import numpy_that_is_not_installed_here\n")
    r = invoke("-q", "--db", str(home / "b.db"), "start", "--repo", str(world.path), "--good",
               world.main[0], "--bad", world.main[-1], "--oracle", str(oracle), "--no-confirm",
               "--any-failure")
    one_line_error(r, "fails before it tests anything")
    assert "pick an older --good" not in r.stderr
