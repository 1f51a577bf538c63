"""The variables that change what an oracle run does, as recorded, keyed and shown.

``TORCH_LOGS=recompiles`` exported in a shell reached the oracle but not the stored facts, the
verdicts' key or the reproduce line: a run with the logs on was reused for one without. The
rule here is one for every way in (``bisect start``, ``plan``, ``check``, a worker):

* the variables a local run *inherits* whose names start with
  :data:`~bisector.base.defaults.ORACLE_ENV_PREFIXES`, plus every ``--env NAME=VALUE`` given
  (which wins), are the run's **oracle environment**;
* variables that only say where things are on this host or which GPU a probe uses
  (``CUDA_HOME``, ``TRITON_CACHE_DIR``, ``CUDA_VISIBLE_DEVICES``: names ending in ``_HOME``,
  ``_PATH``, ``_DIR``, ``_ROOT``, and the device placement that ``--gpus`` owns) are inherited
  as they are and never keyed, unless given with ``--env``;
* at run time the host's own prefixed variables are replaced by the recorded ones
  (:func:`apply`), so a resumed run or a worker runs what the key says, not its shell's;
* in the key a secret-named variable's value is a hash (:func:`keyed`); anywhere it is shown,
  ``***`` (:func:`shown`): secrets never leave the box.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping

from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.redact import MASK, secret_name

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Where things are on this host (a path that differs between boxes, not behaviour).
_HOST_SUFFIXES = ("_HOME", "_PATH", "_DIR", "_ROOT")
# Which GPU a probe sees: --gpus sets these per probe; the GPU models are keyed instead.
_PLACEMENT = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})


# What a box's image says about itself (``CUDA_VERSION=12.8.1``, the architectures its torch
# was built for): recorded and keyed as inherited, never put into a reproduce line as if the
# user had chosen it.
_IMAGE = frozenset({"TORCH_CUDA_ARCH_LIST", "CUDA_DRIVER_VERSION", "NV_CUDA_LIB_VERSION"})


def describes_image(name: str) -> bool:
    return name in _IMAGE or name.endswith("_VERSION")


def chosen(pairs: Iterable[str], inherited: Iterable[str] = ()) -> tuple[str, ...]:
    """The ``NAME=VALUE`` words a user chose: without the ``inherited`` names (taken from the
    environment the run inherited, not given with ``--env``: an H200 image's
    ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` was in every suggested command) and without those
    a box's image describes itself with (``CUDA_VERSION``, ``TORCH_CUDA_ARCH_LIST``; what a
    bisection recorded before ``inherited`` was): facts of that box, not choices another
    machine should repeat."""
    drop = set(inherited)
    return tuple(w for w in pairs if (name := w.partition("=")[0]) not in drop
                 and not describes_image(name))


def inherited_names(given: Iterable[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The names :func:`resolve` takes from ``environ`` that ``given`` (``--env``) does not
    set: the oracle environment's part the user never typed."""
    typed = parse(given)
    return tuple(k for k in inherited(environ) if k not in typed)


def parse(pairs: Iterable[str], flag: str = "--env") -> dict[str, str]:
    """``NAME=VALUE`` words as a dict (later wins); a bad word is a one-line usage error."""
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not NAME.fullmatch(name):
            raise UsageError(f"{flag} {pair[:60]!r}: write NAME=VALUE with a variable name of "
                             f"letters, digits and _, e.g. {flag} TORCH_LOGS=recompiles")
        if name.startswith("BISECTOR_"):
            raise UsageError(f"{flag} {name}: bisector sets BISECTOR_* variables for each run "
                             f"itself; give another name")
        out[name] = value
    return out


def behaviour(name: str) -> bool:
    """Whether an inherited variable of this name changes what a run does (and is keyed)."""
    return (name.startswith(defaults.ORACLE_ENV_PREFIXES) and name not in _PLACEMENT
            and not name.endswith(_HOST_SUFFIXES))


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The behaviour-changing variables of ``environ`` (this process's, for a local run)."""
    return {k: v for k, v in sorted(environ.items()) if behaviour(k)}


def resolve(given: Iterable[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """The oracle environment as ``NAME=VALUE`` words, sorted: what ``environ`` passes on,
    overridden by ``given``. The words are what the request stores and the reproduce line
    repeats as ``--env``."""
    env = {**inherited(environ), **parse(given)}
    return tuple(f"{k}={v}" for k, v in sorted(env.items()))


def apply(base: Mapping[str, str], env: Mapping[str, str]) -> dict[str, str]:
    """``base`` (the host's environment) with its behaviour-changing variables replaced by
    ``env``: the run gets exactly what was recorded and keyed."""
    return {**{k: v for k, v in base.items() if not behaviour(k)}, **env}


def keyed(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as it goes into the verdicts' key: a secret's value as its sha256
    (two different tokens are two keys; the token itself is never stored in the key)."""
    return {k: ("sha256:" + hashlib.sha256(v.encode()).hexdigest() if secret_name(k) else v)
            for k, v in sorted(env.items())}


def shown(env: Mapping[str, str]) -> dict[str, str]:
    """The environment as facts and reports show it: a secret's value is ``***``."""
    return {k: (MASK if secret_name(k) and v else v) for k, v in sorted(env.items())}


def word(pair: str) -> str:
    """One ``NAME=VALUE`` word of a command line to show: a secret's value ``***``."""
    name, _, value = pair.partition("=")
    return f"{name}={MASK}" if secret_name(name) and value else pair
