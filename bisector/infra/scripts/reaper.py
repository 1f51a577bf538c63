"""Run a command so that nothing it starts outlives it: ``python reaper.py MARK -- CMD ...``.

An oracle may start a daemon (``setsid`` plus a double fork): a process-group kill misses it,
and it would run on beside the next probe. This small process sits between the controller and
the oracle and is a *child subreaper* (``PR_SET_CHILD_SUBREAPER``): every descendant that is
orphaned is re-parented to it instead of to init, whatever session it made. When the oracle
exits (or this process is told to stop: the timeout, Ctrl-C, or the controller's death through
``PR_SET_PDEATHSIG``), it kills every remaining descendant and reaps it, then exits with the
oracle's status. ``MARK`` goes into the environment as ``BISECTOR_PROBE``, so that leftovers of a
reaper that was itself killed with SIGKILL can still be found and swept
(:func:`bisector.infra.proc.sweep_probes`).

Standalone on purpose (standard library only): it is started by path, before anything else.
Every probe pays its start, so it imports only what it calls: ``_signal`` (what ``signal`` wraps
in enums; the enums cost an import of ``enum``), no ``contextlib``, no ``__future__``. That
cuts a run under it from 20 to 15 ms here, 31 to 22-26 ms on an H100 box.
"""

import ctypes
import os
import select
import sys
import time

TYPE_CHECKING = False  # mypy reads it as typing's (importing typing costs more than _signal)
if TYPE_CHECKING:
    import signal
else:
    try:
        import _signal as signal  # CPython's own; ``signal`` is it plus enums
    except ImportError:  # another implementation
        import signal

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
MARK_VAR = "BISECTOR_PROBE"
PARENT_VAR = "BISECTOR_REAPER_PARENT"
# Exit status when the reaper itself could not run the oracle: above 127, so it is classified
# as an abnormal exit (a skip that is not reused), never as a verdict on the commit.
BROKEN = 255


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:  # gone meanwhile
        return


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            continue
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], _children(pid)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def kill_descendants(deadline_s: float = 5.0) -> None:
    """SIGKILL every descendant and reap until none is left (new orphans keep arriving)."""
    me = os.getpid()
    end = time.monotonic() + deadline_s
    while True:
        kids = _descendants(me)
        for p in kids:
            _kill(p, signal.SIGKILL)
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            if not _descendants(me):
                return
        if not kids and not _children(me):
            return
        if time.monotonic() > end:
            return
        time.sleep(0.02)


# Above ruff's limits on purpose: a standalone script (no bisector import) run by a container's
# reaper.
def main(argv: list[str]) -> int:  # noqa: C901
    if len(argv) < 3 or argv[1] != "--":
        print("usage: reaper.py MARK -- CMD [ARGS...]", file=sys.stderr)
        return BROKEN
    mark, cmd = argv[0], argv[2:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the controller died: clean up and go
    parent = os.environ.get(PARENT_VAR)
    if parent and parent.isdigit() and os.getppid() != int(parent):
        return BROKEN  # the controller died before the death signal was armed
    stopping = False

    def stop(signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    # Woken, not polling: every signal (a child's exit is SIGCHLD) writes a byte to this pipe,
    # so the oracle's end is seen at once. A 50 ms poll once cost every probe ~50 ms.
    wake, woken = os.pipe()
    os.set_blocking(wake, False)
    os.set_blocking(woken, False)
    signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    env = {k: v for k, v in os.environ.items() if k != PARENT_VAR}
    env[MARK_VAR] = mark
    pid = os.fork()
    if pid == 0:  # the oracle
        signal.set_wakeup_fd(-1)
        # SIGPIPE and SIGXFSZ too: Python ignores them for itself, and an ignored signal stays
        # ignored across exec (a pipeline in the oracle would end "Broken pipe", exit 1).
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD,
                    signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execvpe(cmd[0], cmd, env)
        except OSError as e:
            print(f"bisector: cannot run {cmd[0]}: {e}", file=sys.stderr)
        os._exit(BROKEN)
    status = None
    while status is None:
        if stopping:  # timeout, Ctrl-C, the controller gone: everything dies now
            kill_descendants()
            return 128 + signal.SIGTERM
        try:
            done, st = os.waitpid(-1, os.WNOHANG)  # the oracle, or a reparented orphan
        except ChildProcessError:
            return BROKEN
        if done == pid:
            status = st
        elif done == 0:
            # Until a signal comes (a child ended, or a stop); a second at most, as a net.
            select.select([wake], [], [], 1.0)
            try:
                os.read(wake, 512)
            except BlockingIOError:  # woken by a signal whose byte another read took
                continue
    kill_descendants()
    if os.WIFSIGNALED(status):
        dead_by = os.WTERMSIG(status)
        if dead_by not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(dead_by, signal.SIG_DFL)
        os.kill(os.getpid(), dead_by)  # die the same way, so the caller classifies it the same
    return os.waitstatus_to_exitcode(status)


def safe_main(argv: list[str]) -> int:
    try:
        return main(argv)
    except Exception as e:  # the reaper's own failure is never the commit's
        print(f"bisector reaper: {e}", file=sys.stderr)
        return BROKEN


if __name__ == "__main__":
    sys.exit(safe_main(sys.argv[1:]))
