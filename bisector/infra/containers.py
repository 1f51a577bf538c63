"""The one place that talks to Docker: the engine handle, labels, orphan sweeps, and the single
container lifecycle that oracle, environment, build and set-up containers all go through.

Why one lifecycle (cibuildwheel's ``OCIContainer`` is the model): a container that outlives its
controller holds a GPU, gigabytes of memory and a bind mount of the cache, so every container
must end the same careful way, whichever code started it:

* a unique name ``bisector-<role>-...`` and labels saying who made it (``bisector.owner``, the
  controller's ``host:pid``) and why (``bisector.role``), so a sweep can find it by label;
* a deadline, past which it is stopped (SIGTERM, SIGKILL after a grace period) and, should the
  engine not answer, killed from outside;
* a kill hook in :mod:`bisector.infra.cancel` while it exists: with several probes in flight Ctrl-C
  reaches the main thread only, and :func:`bisector.infra.cancel.stop_all` removes every container
  from there;
* removal in ``finally`` that never raises, also when create or start failed halfway;
* one exception, :class:`ContainerFailed`, for everything that means "the container could not
  run" (image missing, create or start refused, the engine gone mid-run): callers turn it into
  an infrastructure skip, never into a verdict about a commit.

``BISECTOR_CONTAINER_SCOPE``, when set, is copied into a ``bisector.scope`` label on every
container: a test suite or CI job sets it to find exactly the containers it caused, although
other bisectors use the same engine.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import ssl
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from bisector.base import defaults
from bisector.base.errors import BisectorError, UsageError
from bisector.infra import cancel
from bisector.infra.owner import local_pid_alive, owner_id


class _OnFirstUse:
    """A module imported when one of its names is first used: the Docker SDK and the HTTP
    stack under it take a tenth of a second and more to import, and a bisection with the
    local executor and host builds never touches them. (``import_module`` holds the import
    lock: two threads asking at once get one import.)"""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


# The SDK has no type information (and the repo's own docker/ folder would shadow it for mypy).
docker: Any = _OnFirstUse("docker")
requests: Any = _OnFirstUse("requests")

LABEL = "bisector.owner"  # a label since the first release: old orphans are still found
ROLE = "bisector.role"
SCOPE = "bisector.scope"
SCOPE_ENV = "BISECTOR_CONTAINER_SCOPE"

# What a failing engine call can raise: the SDK's own errors, or the HTTP layer's (a timeout, a
# connection reset when dockerd restarts).
def _engine_errors() -> tuple[type[BaseException], ...]:
    return (docker.errors.DockerException, requests.exceptions.RequestException)


class ContainerFailed(BisectorError):
    """The container could not run at all; ``reason`` is one line a report can show.

    ``image_missing`` lets a caller word that case itself (which image, which make target).
    """

    def __init__(self, reason: str, *, image_missing: bool = False) -> None:
        super().__init__(reason)
        self.image_missing = image_missing

    @property
    def reason(self) -> str:
        return self.message


@dataclass(frozen=True)
class Finished:
    """What a container did. ``exit_code`` is None when it was stopped at its deadline."""

    exit_code: int | None
    timed_out: bool
    oom_killed: bool
    seconds: float  # the engine's StartedAt -> FinishedAt, not our clock
    logs: str = ""  # stdout and stderr together, when asked for


def client() -> Any:
    try:
        c = docker.from_env()
        c.ping()
        return c
    except docker.errors.DockerException as e:
        raise UsageError(
            f"cannot reach the Docker engine ({e}): start dockerd or use --executor local"
        ) from None


# -- labels and sweeps -------------------------------------------------------------------------


def labelled(c: Any, owner: str | None = None, *,
             where: Mapping[str, str] | None = None) -> list[Any]:
    """The containers bisector made: all of them, or one owner's, or those whose labels match
    ``where`` (``{"bisector.scope": ...}``, ``{"bisector.bisection": ...}``).

    The SDK lists, then inspects each container; one removed in between (a probe finishing
    elsewhere) would raise ``NotFound`` for the whole listing, so those are ignored.
    """
    wanted = [f"{LABEL}={owner}" if owner else LABEL]
    wanted += [f"{k}={v}" for k, v in (where or {}).items()]
    return list(c.containers.list(all=True, filters={"label": wanted}, ignore_removed=True))


def sweep_orphans(c: Any, alive: Callable[[str], bool], *, owner: str | None = None,
                  where: Mapping[str, str] | None = None) -> list[str]:
    """Remove containers whose controller is gone (killed, crashed); returns their names.

    ``owner`` / ``where`` narrow the sweep as in :func:`labelled`.
    """
    swept = []
    for ctr in labelled(c, owner, where=where):
        if alive(ctr.labels.get(LABEL, "")):
            continue
        with contextlib.suppress(docker.errors.NotFound):  # removed meanwhile: also fine
            ctr.remove(force=True)
            swept.append(ctr.name)
    return swept


def local_owner_alive(owner: str) -> bool:
    """Another machine's controller is not ours to judge: only a dead local pid is an orphan."""
    return local_pid_alive(owner) is not False


# -- images and host facts ---------------------------------------------------------------------


def image_id(c: Any, name: str) -> str:
    """The image's id (its digest keys verdicts and wheels), "" when it does not exist."""
    try:
        return str(c.images.get(name).id)
    except docker.errors.ImageNotFound:
        return ""
    except _engine_errors() as e:
        raise _failed(f"cannot inspect image {name}", e) from None


def image_python_tag(c: Any, name: str) -> str:
    """``cp311``: the Python the image runs, which a wheel built or installed there must fit."""
    code = "import sys; print(f'cp{sys.version_info[0]}{sys.version_info[1]}')"
    done = run_container(c, name, ["python3", "-c", code], role="setup", timeout_s=120,
                         logs=True, network_mode="none")
    lines = done.logs.strip().splitlines()
    if done.exit_code != 0 or not lines:
        raise ContainerFailed(f"image {name} cannot run python3: "
                              f"{lines[-1] if lines else 'no output'}")
    return lines[-1].strip()


def gpu_requests(gpus: str | None) -> list[Any]:
    """``--gpus all`` or ``--gpus 0,1`` as Docker device requests (NVIDIA container toolkit)."""
    if not gpus:
        return []
    if gpus == "all":
        return [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [docker.types.DeviceRequest(device_ids=gpus.split(","), capabilities=[["gpu"]])]


def host_ca_bundle() -> Path | None:
    """The CA bundle this machine trusts, for containers that fetch packages (a TLS-inspecting
    proxy's certificate is in it; the image's own bundle would refuse that proxy)."""
    for cand in (os.environ.get("SSL_CERT_FILE"), ssl.get_default_verify_paths().cafile,
                 "/etc/ssl/certs/ca-certificates.crt"):
        if cand and Path(cand).is_file():
            return Path(cand).resolve()
    return None


# -- the lifecycle -----------------------------------------------------------------------------


def container_name(role: str, labels: Mapping[str, str] | None = None) -> str:
    """``bisector-oracle-<commit10>-<random>``: unique, and readable in ``docker ps``."""
    if not re.fullmatch(r"[a-z]+", role):
        raise ValueError(f"container role must be a lowercase word, not {role!r}")
    commit = (labels or {}).get("bisector.commit", "")
    middle = [commit[:10]] if re.fullmatch(r"[0-9a-f]{7,64}", commit) else []
    return "-".join(["bisector", role, *middle, uuid.uuid4().hex[:10]])


def _labels(role: str, labels: Mapping[str, str] | None) -> dict[str, str]:
    scope = os.environ.get(SCOPE_ENV)
    return {**(labels or {}), **({SCOPE: scope} if scope else {}), LABEL: owner_id(),
            ROLE: role}


def _remove(c: Any, name: str) -> None:
    """Remove by name, whatever state the container is in; never raises."""
    with contextlib.suppress(Exception):  # gone already, or the engine is: nothing to do
        c.api.remove_container(name, force=True)


def _failed(what: str, e: BaseException) -> ContainerFailed | cancel.Stopped:
    """An engine error while a stop is under way is the stop, not an infrastructure fault."""
    if cancel.stopping():
        return cancel.Stopped("stopping")
    detail = " ".join(str(getattr(e, "explanation", None) or e).split())[:300]
    return ContainerFailed(f"{what}: {detail}")


@contextlib.contextmanager
def started(c: Any, image: str, cmd: list[str], *, role: str,
            labels: Mapping[str, str] | None = None, **create_kwargs: Any) -> Iterator[Any]:
    """Create and start a container; yields the SDK's container object; removes it on exit.

    Raises :class:`ContainerFailed` when it cannot be created or started, and
    :class:`bisector.infra.cancel.Stopped` when the run is being stopped (before or meanwhile).
    """
    name = container_name(role, labels)
    # Registered before create, removing by name: whenever stop_all comes, either the container
    # does not exist yet (then `stopping()` is checked below) or the hook removes it.
    with cancel.killable(lambda: c.api.remove_container(name, force=True)):
        try:
            try:
                ctr = c.containers.create(image, cmd, name=name, labels=_labels(role, labels),
                                          **create_kwargs)
            except docker.errors.ImageNotFound:
                raise ContainerFailed(f"image {image} is missing: run `make images`",
                                      image_missing=True) from None
            except _engine_errors() as e:
                raise _failed(f"{role} container could not be created", e) from None
            if cancel.stopping():
                raise cancel.Stopped("stopping")
            try:
                ctr.start()
            except _engine_errors() as e:
                raise _failed(f"{role} container did not start", e) from None
            yield ctr
        finally:
            _remove(c, name)  # always: also on Ctrl-C, a timeout, or a failed start


def wait_or_stop(ctr: Any, timeout_s: float | None) -> tuple[int | None, bool]:
    """Wait for a started container; past ``timeout_s`` stop it (SIGTERM, SIGKILL after the
    grace period) and, should the engine not answer either, kill it from outside.

    Returns (exit status or None, timed out). ``timeout_s=None`` waits as long as it runs.
    """
    try:
        return int(ctr.wait(timeout=timeout_s)["StatusCode"]), False
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        pass
    ctr.stop(timeout=defaults.CONTAINER_GRACE_S)
    try:
        ctr.wait(timeout=defaults.CONTAINER_GRACE_S + 30)
    except (requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError):
        ctr.kill()
    return None, True


def finish(ctr: Any, timeout_s: float | None, *, role: str, logs: bool = False) -> Finished:
    """Wait (with the deadline), then read what the engine knows of the run."""
    try:
        code, timed_out = wait_or_stop(ctr, timeout_s)
        ctr.reload()
        state = ctr.attrs.get("State", {})
        text = bytes(ctr.logs()).decode(errors="replace") if logs else ""
    except _engine_errors() as e:
        raise _failed(f"lost the {role} container while it ran", e) from None
    if cancel.stopping():
        raise cancel.Stopped("stopping")  # killed by stop_all: what it did means nothing
    return Finished(code, timed_out, bool(state.get("OOMKilled")),
                    _seconds(state.get("StartedAt", ""), state.get("FinishedAt", "")), text)


def run_container(c: Any, image: str, cmd: list[str], *, role: str,
                  labels: Mapping[str, str] | None = None, timeout_s: float | None = None,
                  logs: bool = False, **create_kwargs: Any) -> Finished:
    """Run one command in a fresh container of ``image`` to its end (or its deadline).

    ``create_kwargs`` go to the SDK's ``containers.create`` (volumes, environment, user,
    network_mode, mem_limit, device_requests, ...). Raises :class:`ContainerFailed` when it
    could not run and :class:`bisector.infra.cancel.Stopped` when the run is being stopped; the
    container is removed in every case.
    """
    with started(c, image, cmd, role=role, labels=labels, **create_kwargs) as ctr:
        return finish(ctr, timeout_s, role=role, logs=logs)


def _seconds(started: str, finished: str) -> float:
    """The container's own run time (the engine's clock, not ours)."""

    def parse(stamp: str) -> datetime:
        head, _, frac = stamp.rstrip("Z").partition(".")
        return datetime.fromisoformat(f"{head}.{(frac + '000000')[:6]}")

    try:
        return max(0.0, (parse(finished) - parse(started)).total_seconds())
    except ValueError:
        return 0.0


def run_as(c: Any, image: str) -> tuple[str, int]:
    """The user a container that runs repository code runs as: never root.

    The host user when the controller is not root (files it writes stay the user's), else the
    image's own non-root user (``USER`` of the Dockerfile, uid 1000 by default).
    """
    if os.getuid() != 0:
        return f"{os.getuid()}:{os.getgid()}", os.getuid()
    user = str(c.images.get(image).attrs["Config"].get("User") or "")
    head = user.split(":")[0]
    uid = int(head) if head.isdigit() and int(head) != 0 else 1000
    return f"{uid}:{uid}", uid


def hand_over(paths: list[Path], uid: int, *, once: bool = False) -> None:
    """Give folders the controller made to the container's user (only needed as root).

    ``once``: a shared folder (uv's cache) is handed over the first time only, marked so."""
    if os.getuid() != 0 or uid == 0:
        return
    for folder in paths:
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / f".owned-by-{uid}"
        if once and marker.exists():
            continue
        for root, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                with contextlib.suppress(OSError):
                    os.lchown(os.path.join(root, name), uid, uid)
        os.chown(folder, uid, uid)
        if once:
            marker.touch()
