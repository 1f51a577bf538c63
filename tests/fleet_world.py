"""Several boxes on this machine, none able to read another's folders: each runs its
processes in a mount namespace of its own (``unshare --mount``) in which every other box's
folder, and the history's origin, is an empty tmpfs. What they share is what a team's boxes
share: the PostgreSQL store, the S3 bucket and the repository's URL (a real ``git daemon``),
all on 127.0.0.1.

Mount namespaces need root (or CAP_SYS_ADMIN), as ``.ci/run`` has; :func:`isolation` says why
when they cannot be made, and the tests that need them skip with that line.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.s3_world import _port
from tests.support import BISECT, ROOT

# Mounts an empty tmpfs over each folder named before "--", then runs the rest.
MASK = ('while [ "$1" != "--" ]; do mount -t tmpfs -o size=1m,mode=000 none "$1" || exit 97; '
        'shift; done; shift; exec "$@"')


def isolation() -> str | None:
    """None when this machine can make mount namespaces, else why not."""
    try:
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                            "mount -t tmpfs none /mnt && umount /mnt"], capture_output=True,
                           text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"no unshare here: {e}"
    return None if r.returncode == 0 else f"no mount namespace: {r.stderr.strip()[-200:]}"


@dataclass
class Box:
    """One box: its own home, cache and clone folder, and the folders it must not see."""

    name: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    hidden: list[Path] = field(default_factory=list)
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        (self.root / "home").mkdir(parents=True, exist_ok=True)
        (self.root / "cache").mkdir(exist_ok=True)

    @property
    def log(self) -> Path:
        return self.root / "log.txt"

    def environ(self) -> dict[str, str]:
        return {**os.environ, "BISECTOR_HOME": str(self.root / "home"),
                "BISECTOR_CACHE_DIR": str(self.root / "cache"), **self.env}

    def argv(self, args: Sequence[str], program: Sequence[str] = tuple(BISECT)) -> list[str]:
        """``program args`` in a mount namespace of this box's own."""
        return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", MASK, "sh",
                *map(str, self.hidden), "--", *program, *args]

    def sees(self, path: Path) -> bool:
        """Whether a process of this box finds ``path`` (its namespace hides other boxes)."""
        return subprocess.run(self.argv([str(path)], ("test", "-e")),
                              env=self.environ()).returncode == 0

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(self.argv(args), cwd=ROOT, env=self.environ(),
                              capture_output=True, text=True, timeout=timeout)
        with self.log.open("a") as f:
            f.write(f"$ {' '.join(args)}\n{done.stderr}\n")
        return done

    def start(self, *args: str, capture: bool = False) -> subprocess.Popen[str]:
        out = subprocess.PIPE if capture else self.log.open("a")
        p = subprocess.Popen(self.argv(args), cwd=ROOT, env=self.environ(), text=True,
                             stdout=out, stderr=subprocess.PIPE if capture else subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()

    def text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def boxes(root: Path, names: Sequence[str], env: dict[str, str],
          also_hidden: Sequence[Path] = ()) -> dict[str, Box]:
    """Boxes under ``root``, each hiding the others' folders and ``also_hidden``; none has a
    GPU (:func:`no_gpu`) until a test gives it one (:func:`fake_gpu`)."""
    cpu = no_gpu(root / "no-gpu")
    env = {**env, "PATH": f"{cpu}:{os.environ['PATH']}"}
    made = {n: Box(n, root / n, dict(env)) for n in names}
    for b in made.values():
        b.hidden = [o.root for o in made.values() if o is not b] + list(also_hidden)
    return made


@contextmanager
def git_server(repo: Path, into: Path) -> Iterator[str]:
    """``repo`` served read-only by a real ``git daemon`` on 127.0.0.1 (partial clones and
    fetches by sha allowed, as a forge allows them); yields its ``git://`` URL."""
    into.mkdir(parents=True, exist_ok=True)
    bare = into / "t.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    for key in ("uploadpack.allowFilter", "uploadpack.allowAnySHA1InWant"):
        subprocess.run(["git", "-C", str(bare), "config", key, "true"], check=True)
    port = _port()
    daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all",
                               f"--base-path={into}", "--listen=127.0.0.1", f"--port={port}",
                               "--enable=upload-pack"], stderr=subprocess.DEVNULL)
    url = f"git://127.0.0.1:{port}/t.git"
    try:
        deadline = time.time() + 30
        while subprocess.run(["git", "ls-remote", url], capture_output=True).returncode:
            if time.time() > deadline:
                raise RuntimeError(f"git daemon on port {port} did not answer")
            time.sleep(0.2)
        yield url
    finally:
        daemon.terminate()
        daemon.wait(timeout=10)


def fake_gpu(folder: Path, model: str, cuda: str = "12.8") -> Path:
    """A folder with an ``nvidia-smi`` naming one GPU of ``model`` (a GPU cannot exist here;
    everything above the driver is real). Put it first on a box's PATH."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(f"""#!/bin/sh
case "$*" in
  *--query-gpu=index,name,compute_cap*) echo "0, {model}, 9.0" ;;
  *--query-gpu*) echo "0" ;;
  *) echo "| NVIDIA-SMI 570.00   Driver Version: 570.00   CUDA Version: {cuda} |" ;;
esac
""")
    smi.chmod(0o755)
    return folder


def no_gpu(folder: Path) -> Path:
    """A folder with an ``nvidia-smi`` that finds no driver, as on a CPU box: put it first on
    a box's PATH so the test means the same on a GPU box."""
    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate "
                   "with the NVIDIA driver.' >&2\nexit 9\n")
    smi.chmod(0o755)
    return folder


def _git_out(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def plant_replacement(repo: Path, victim: str, tree_of: str) -> str:
    """A replace ref in ``repo`` serving, under ``victim``'s sha, a commit with ``tree_of``'s
    tree (a regression's commit that then looks like its parent). Returns the fake commit."""
    fake = _git_out(repo, "-c", "user.name=m", "-c", "user.email=m@m", "commit-tree",
                    f"{tree_of}^{{tree}}", "-p", f"{victim}^", "-m", "swapped")
    _git_out(repo, "replace", victim, fake)
    return fake


def grow(repo: Path, message: str) -> str:
    """One more commit on the served ``main`` (so a mirror must fetch again)."""
    sha = _git_out(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit-tree",
                   "main^{tree}", "-p", "main", "-m", message)
    _git_out(repo, "update-ref", "refs/heads/main", sha)
    return sha
