"""Issue 20, class 3: a probe can write into the cache.

A command oracle ran in a copy of the cached commit tree made of hard links, so a write into a
tracked file (as root, or after a ``chmod``) changed the cached file behind the link and every
later verdict of that commit; the ``--manual`` shell opened in the cached tree itself, and, as
an interactive shell reading the person's ``~/.bashrc``, let pyenv/conda (a ``PATH`` entry, a
``PROMPT_COMMAND`` hook, an alias) put another ``python`` before the probed environment's.

The attacks are made for real: a command oracle that appends to a tracked file and says bad
once it sees such a write, run twice on one commit; a manual bisection driven through a
pseudo-terminal (so bash is interactive and reads the start-up files, as for a person) with a
``~/.bashrc`` that puts a fake ``python`` first three ways, where the test types into the shell.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from bisector.app.demo.torchlet import SyntheticHistory, generate
from tests.support import BISECT, ROOT, git, run_cli, wait_for

pytestmark = [pytest.mark.adversarial, pytest.mark.e2e]

MARK = "# written by a probe"
# Bad once it sees an earlier probe's write; then writes into a tracked file of its tree and
# prints the file's number of links (1: a file of its own; more: shared with the cache).
WRITER = (f"f=torchlet/ops.py; if grep -q '{MARK}' \"$f\"; then echo 'sees a write'; exit 1; "
          f"fi; chmod u+w \"$f\" 2>/dev/null; echo '{MARK}' >> \"$f\"; "
          f"echo links=$(stat -c %h \"$f\"); exit 0")


def _hist(tmp_path: Path, seed: int) -> SyntheticHistory:
    return generate(tmp_path / "t", commits=8, culprit=5, broken=(), seed=seed,
                    release_at=None, side_branch_at=None)


def test_a_command_that_writes_into_its_tree_changes_nothing_for_the_next_run(
        home: Path, private_cache: Path, tmp_path: Path) -> None:
    hist = _hist(tmp_path, 20301)
    sha = hist.main[2]
    original = git(hist.path, "show", f"{sha}:torchlet/ops.py")
    runs = []
    for _ in range(2):
        r = run_cli("check", "--repo", str(hist.path), "--commit", sha, "--json", "--",
                    "sh", "-c", WRITER)
        assert r.returncode in (0, 1), r.stderr[-2000:]
        runs.append(json.loads(r.stdout))
    # Before: good, then bad ("sees a write": the first run's append reached the cache).
    assert [d["verdict"] for d in runs] == ["good", "good"], runs[1]
    assert all("links=1" in json.dumps(d) for d in runs), runs  # its own file, never a link
    cached = private_cache / "trees" / sha / "torchlet" / "ops.py"
    assert cached.read_text().rstrip("\n") == original.rstrip("\n")
    assert not cached.stat().st_mode & 0o222  # the cached tree stays read-only


ASKED = re.compile(r"judge ([0-9a-f]{12})")
INTRO = re.compile(r"bisector: python is (\S+): torchlet (\S+) git ([0-9a-f]{40})")


def _fake_home(tmp_path: Path) -> tuple[Path, Path]:
    """A home whose ~/.bashrc puts a fake ``python`` first as pyenv and conda do: on PATH,
    again before every prompt (a PROMPT_COMMAND hook), and as an alias."""
    user = tmp_path / "user-home"
    fake = tmp_path / "pyenv-shims"
    fake.mkdir(parents=True)
    (fake / "python").write_text("#!/bin/sh\necho 'the wrong python'\nexit 3\n")
    (fake / "python").chmod(0o755)
    user.mkdir()
    (user / ".bashrc").write_text(
        f"export PATH={fake}:\"$PATH\"\n"
        f"PROMPT_COMMAND='PATH=\"{fake}:$PATH\"'\n"
        f"alias python={fake}/python\n")
    return user, fake


def test_the_manual_shell_is_a_private_tree_with_the_probed_python_first(
        home: Path, private_cache: Path, tmp_path: Path) -> None:
    bash = shutil.which("bash")
    assert bash, "the manual shell is bash: this machine (and CI) has it"
    hist = _hist(tmp_path, 20302)
    user, fake = _fake_home(tmp_path)
    seen = tmp_path / "seen.txt"
    env = {**os.environ, "HOME": str(user), "SHELL": bash}
    # A terminal on stdin and stderr, as a person's: bash is interactive, reads ~/.bashrc.
    master, slave = os.openpty()
    p = subprocess.Popen(
        [*BISECT, "start", "--repo", str(hist.path), "--good", hist.main[0], "--bad",
         hist.main[-1], "--manual", "--json"],
        cwd=ROOT, env=env, stdin=slave, stdout=subprocess.PIPE, stderr=slave,
        start_new_session=True)
    os.close(slave)
    screen: list[str] = []

    def read_terminal() -> None:
        try:
            while data := os.read(master, 4096):
                screen.append(data.decode(errors="replace"))
        except OSError:
            pass

    def asked() -> str | None:
        m = ASKED.search("".join(screen))
        return m[1] if m else None

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        sha = wait_for(asked, timeout=300)
        assert sha, "".join(screen)[-3000:]
        # Typed at the prompt, then into the shell the prompt opens.
        os.write(master, b"shell\n")
        os.write(master, (f"{{ command -v python; pwd; stat -c %h torchlet/ops.py; }} "
                          f"> {seen}; echo '{MARK}' >> torchlet/ops.py; exit\n").encode())
        assert wait_for(lambda: seen.exists() and len(seen.read_text().split()) >= 3,
                        timeout=120), "".join(screen)[-3000:]
        os.write(master, b"quit\n")
        p.communicate(timeout=120)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        os.close(master)
    out = "".join(screen).replace("\r\n", "\n")
    python, cwd, links = seen.read_text().split()[:3]
    assert python.startswith(str(private_cache / "envs")), (python, out[-3000:])
    assert python.endswith("/bin/python") and str(fake) not in python
    assert links == "1"  # the shell's tree is a copy of its own ...
    assert not cwd.startswith(str(private_cache / "trees")), cwd
    assert not Path(cwd).exists()  # ... removed after the answer
    full = next(s for s in hist.main if s.startswith(sha))
    cached = private_cache / "trees" / full / "torchlet" / "ops.py"
    assert MARK not in cached.read_text()  # ... and the cache never saw the write
    # The shell's first lines say which python it runs, with the probed package's version.
    m = INTRO.search(out)
    assert m, out[-3000:]
    assert m[1] == python and m[3] == full and m[2].endswith(f"+git{full[:7]}")
    assert "not the probed environment" not in out
    assert p.returncode == 130, out[-3000:]  # quit: interrupted, the answers kept
