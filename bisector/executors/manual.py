"""The manual executor: the local executor's environment and the commit's tree, a person's
answer instead of an oracle run (:mod:`bisector.oracle.manual`).

It implements the same :class:`~bisector.executors.base.Executor` protocol, so the pipeline,
the store, ``resume``, reports and the search treat a person's answer exactly as an oracle's
exit status: 0 good, 1 bad, 125 skip. An environment that cannot be made is a skip retried
later, as for any oracle: nobody is asked about a commit they could not try.

The person works in a private copy of the commit's tree (``artifacts/trees.run_tree``), never
in the cached one, and in bash with the environment first after their start-up files
(:mod:`bisector.executors.shell`). An environment the person changed (``pip install`` in the
shell) is made again for the next probe, and the answer is not reused, as for an oracle.

``retry`` (mozregression's) makes the private tree again, checks the environment (made again
when the shell changed it) and opens the shell before asking again; ``back`` abandons this
probe (nothing recorded) and raises :class:`~bisector.oracle.manual.TakeBack` for the runner.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bisector.artifacts.export import ExportError
from bisector.artifacts.installable import Installable
from bisector.artifacts.trees import run_tree
from bisector.core.verdict import classify
from bisector.executors.base import RunResult, infra_skip
from bisector.executors.envfiles import changed_files
from bisector.executors.facts import learn_facts
from bisector.executors.local import InstallFailed, LocalExecutor, in_use
from bisector.executors.shell import shell_line, shell_rc
from bisector.infra import inuse
from bisector.oracle.manual import Asks, ManualProbe, Reply, TakeBack
from bisector.oracle.script import Oracle

WORDS = {Reply.BUG: "shows the bug", Reply.NO_BUG: "does not show the bug",
         Reply.SKIP: "cannot be judged"}


class ManualExecutor:
    """``undo`` names the answer ``back`` would take back (None: there is none), read each time
    a question is put: the executor knows probes, not the bisection's store."""

    name = "manual"
    contained = False

    def __init__(self, inner: LocalExecutor, asks: Asks, trees: Callable[[str], Path],
                 undo: Callable[[], str | None] = lambda: None) -> None:
        self.inner, self.asks, self.trees, self.undo = inner, asks, trees, undo

    @property
    def python_tag(self) -> str:
        return self.inner.python_tag

    def unready(self, oracle: Oracle) -> str | None:
        return self.inner.unready(oracle)

    def fingerprint_facts(self) -> dict[str, Any]:
        return self.inner.fingerprint_facts()

    def prepare(self, inst: Installable, oracle: Oracle) -> None:
        """The environment made ahead, while the person judges the probe before."""
        self.inner.prepare(inst, oracle)

    def run(self, *, inst: Installable, oracle: Oracle, commit: str, run_dir: Path,
            gpu: str | None = None) -> RunResult:
        # Marked in use for as long as the person judges, as a probe is: `bisect gc` removing
        # the environment they are in would have them judge a broken one (infra/inuse.py).
        env = self.inner.env_dir(inst.key, oracle.meta.dependencies)
        with inuse.using(in_use(inst, oracle, commit, env), f"judged by hand: {commit[:12]}"):
            return self._run(inst=inst, oracle=oracle, commit=commit, run_dir=run_dir)

    def _run(self, *, inst: Installable, oracle: Oracle, commit: str,
             run_dir: Path) -> RunResult:
        run_dir.mkdir(parents=True, exist_ok=True)
        retried = 0
        while True:  # once, or again after each `retry`: a fresh tree, a checked environment
            try:
                venv = self.inner.ensure_env(inst, oracle.meta.dependencies)
            except (InstallFailed, OSError, subprocess.SubprocessError) as e:
                return infra_skip(f"environment install failed: {e}".strip())
            try:
                tree = self.trees(commit)
            except ExportError as e:
                return infra_skip(f"the commit's tree could not be exported: {e}")
            facts = learn_facts(venv, None, self.inner.import_name)
            started = time.monotonic()
            with run_tree(tree) as work:
                rc = work.parent / "bisector-shell.rc"
                rc.write_text(shell_rc(venv, work, commit, inst.obtained,
                                       self.inner.import_name, os.environ.get("SHELL", "")))
                probe = ManualProbe(commit, venv, work, shell_line(rc, venv, work),
                                    inst.obtained, undo=self.undo(), retried=retried)
                code = self.asks.ask(probe)
            if code in (Reply.RETRY, Reply.BACK):
                # Whatever the shell changed is not carried into the next try or probe.
                if changed_files(venv):
                    self.inner.discard(venv)
                if code == Reply.BACK:
                    raise TakeBack(commit)
                retried += 1
                continue
            break
        if code not in WORDS:
            raise ValueError(f"not an answer: {code}")
        said = f"judged by hand: it {WORDS[code]}"
        (run_dir / "stdout.txt").write_text(said + "\n")
        c = classify(code, timed_out=False, timeout_s=oracle.meta.timeout)
        reusable, touched = c.reusable, changed_files(venv)
        if touched:  # changed in the shell: made again for the next probe, answer not reused
            self.inner.discard(venv)
            reusable = False
            said += (f"; the environment was changed in the shell ({len(touched)} files, "
                     f"e.g. {touched[0]}): not reused")
        return RunResult(c.outcome, said, code, time.monotonic() - started,
                         reusable=reusable,
                         stdout_path=run_dir / "stdout.txt", output_tail=said,
                         facts={**facts, "manual": WORDS[code]})
