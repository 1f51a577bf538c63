"""The watch's tables of bisector.toml: what a good file means, and one line for every
mistake, naming the file, the key and the fix. Also the notifier's failures and the schedule."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from bisector.app.watch.config import Notify, load
from bisector.app.watch.notify import send
from bisector.base.errors import BisectorError, OracleError, UsageError
from bisector.cli.watch import next_time


def write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "repo").mkdir(exist_ok=True)
    path = tmp_path / "bisector.toml"
    path.write_text(text)
    return path


SUITE = '[[suite]]\nname = "cpu"\nrepo = "repo"\noracles = ["torchlet_norm"]\n'


def test_a_suite_with_defaults_and_its_bisect_options(tmp_path: Path) -> None:
    path = write(tmp_path, '[watch]\nbisect = false\nevents = "ev"\n'
                 f'[notify]\ncommand = "{sys.executable} -c pass"\non = ["culprit"]\n'
                 + SUITE + '[suite.bisect]\njobs = 2\nconfirm = false\n'
                 'build-env = ["A=1"]\n')
    cfg = load([path])
    (s,) = cfg.suites
    assert (s.name, s.repo, s.torch, s.oracles) == ("cpu", tmp_path / "repo", "nightly",
                                                    ("torchlet_norm",))
    assert s.start == {"jobs": 2, "confirm": False, "build_env": ("A=1",)}
    assert cfg.bisect is False and cfg.events_dir == tmp_path / "ev"
    assert cfg.notify.command == (sys.executable, "-c", "pass")
    assert cfg.notify.on == {"culprit"}


def test_a_later_file_replaces_a_suite_of_the_same_name(tmp_path: Path) -> None:
    first = write(tmp_path, SUITE + 'variant = "cu126"\n')
    other = tmp_path / "other"
    other.mkdir()
    (other / "repo").mkdir()
    second = other / "bisector.toml"
    second.write_text(SUITE + 'variant = "cu128"\n')
    (s,) = load([first, second]).suites
    assert s.variant == "cu128" and s.repo == other / "repo"


@pytest.mark.parametrize(("text", "needle"), [
    (SUITE.replace("oracles", "oracle"), "unknown key 'oracle'; did you mean 'oracles'?"),
    (SUITE + 'torch = "nighty"\n', "torch = 'nighty': not a torch source; use one of "
     "nightly, release, installed, wheel (did you mean 'nightly'?)"),
    (SUITE.replace('repo = "repo"\n', ""), "repo is missing; give the clone"),
    (SUITE.replace('repo = "repo"', 'repo = "nowhere"'), "is not a folder; clone the project"),
    (SUITE + 'index = "pytorch.org/whl"\n', "index = 'pytorch.org/whl': give an http(s) URL"),
    (SUITE + 'torch = "wheel"\n', "torch = \"wheel\" and a wheel = \"PATH\" go together"),
    (SUITE + 'python = "9.99"\n', "python = '9.99': no such interpreter here"),
    (SUITE + 'profile = "torch"\n', "profile = 'torch': use one of"),
    (SUITE + '[suite.bisect]\ngood = "v1"\n', "[suite.bisect] good: the suite sets it itself"),
    (SUITE + '[suite.bisect]\njbos = 2\n', "unknown key 'jbos'; did you mean 'jobs'?"),
    (SUITE + '[suite.bisect]\njobs = 0\n', "[suite.bisect]: --jobs 0: give at least 1"),
    (SUITE + SUITE, "two suites are named 'cpu'"),
    (SUITE.replace('"cpu"', '"a b"'), "name = 'a b': give each suite a name"),
    (SUITE.replace('["torchlet_norm"]', '[]'), "oracles = []: give a list of oracle names"),
    ('[notify]\non = ["flop"]\n', "on = ['flop']: a list of events among flip, culprit"),
    ('[notify]\ntimeout = 0\n', "timeout = 0: give positive seconds"),
    ('[watch]\nbisect = "yes"\n', "[watch] bisect = 'yes': write true or false"),
    ('[watch]\nevery = "daily"\n', "[watch]: unknown key 'every'"),
    ('suite = 3\n', "suite must be an array of tables"),
    ('[[suite\n', "not a readable TOML file"),
])
def test_each_mistake_is_one_line_naming_the_key_and_the_fix(tmp_path: Path, text: str,
                                                             needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UsageError) as e:
        load([path])
    assert needle in e.value.message and str(path) in e.value.message
    assert "\n" not in e.value.message


def test_an_unknown_oracle_names_the_suite(tmp_path: Path) -> None:
    path = write(tmp_path, SUITE.replace("torchlet_norm", "no_such_oracle"))
    with pytest.raises(OracleError) as e:
        load([path])
    assert "[[suite]] 'cpu' oracles:" in e.value.message and "no_such_oracle" in e.value.message


def test_a_failing_notifier_is_a_warning_never_an_error(tmp_path: Path) -> None:
    event = {"event": "flip", "text": "x", "issue_file": str(tmp_path / "x.md")}
    fails = Notify(command=(sys.executable, "-c", "import sys; print('boom'); sys.exit(4)"))
    assert "exited 4 (boom)" in str(send(fails, dict(event)))
    gone = Notify(command=(str(tmp_path / "vanished"),))
    assert "could not start" in str(send(gone, dict(event)))
    # A notifier that never ends by itself (it waits for a signal): the timeout stops it.
    slow = Notify(command=(sys.executable, "-c", "import signal; signal.pause()"), timeout_s=0.3)
    assert "ran past" in str(send(slow, dict(event)))
    assert send(Notify(), dict(event)) is None  # no command: nothing to do
    quiet = Notify(command=(sys.executable, "-c", "pass"), on=frozenset({"culprit"}))
    assert send(quiet, dict(event)) is None


def test_the_schedule_is_cron(tmp_path: Path) -> None:
    from datetime import datetime

    assert next_time("0 3 * * *", datetime(2026, 1, 1, 4, 0)) == datetime(2026, 1, 2, 3, 0)
    assert next_time("0 3 * * *", datetime(2026, 1, 1, 2, 59)) == datetime(2026, 1, 1, 3, 0)
    with pytest.raises(BisectorError, match="not a cron expression"):
        next_time("every day", datetime(2026, 1, 1))


@pytest.mark.adversarial
def test_a_timed_out_notifier_takes_its_setsid_child_with_it(tmp_path: Path) -> None:
    """Issue 32, item 8: a notifier's ``setsid`` child left the process group the timeout
    killed, while the warning said everything it started was stopped."""
    import os
    import select

    pid_file = tmp_path / "child.pid"
    event = {"event": "flip", "text": "x", "issue_file": str(tmp_path / "x.md")}
    hangs = Notify(command=("sh", "-c", f"setsid sleep 300 & echo $! > {pid_file}; sleep 30"),
                   timeout_s=1.0)
    assert "ran past" in str(send(hangs, dict(event)))
    pid = int(pid_file.read_text())
    try:
        fd = os.pidfd_open(pid)  # readable the moment the process ends (a zombie too)
    except ProcessLookupError:
        return  # ended and reaped already
    try:
        # 10 s: only a guard that turns a child left running into a failure
        if not select.select([fd], [], [], 10)[0]:
            os.kill(pid, 9)
            raise AssertionError(f"the notifier's setsid child {pid} outlived it")
    finally:
        os.close(fd)
