"""From a request to a stored bisection: validate, resolve, discover wheels, record.

``prepare`` checks every input (repository, refs, range, oracle, profile, executor, builder)
and resolves the :class:`~bisector.run.config.RunConfig` without touching the store, so a refused
``start`` does not even create a database. ``discover`` maps the indexes' wheels onto the
candidates (an index problem stops here, before anything is recorded); ``record`` stores the
bisection and its frozen candidate list in one transaction, with the marks of ``--from-log``
(read and checked in ``prepare``, :mod:`bisector.run.from_log`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import git

from bisector.artifacts.build import (
    build_settings,
    detect_cuda_arch,
    gpu_inventory,
    python_tag,
)
from bisector.artifacts.docker_build import repository_id
from bisector.artifacts.installable import InstalledBase, find_installed
from bisector.artifacts.nightly_urls import DIRECT
from bisector.artifacts.prebuilt import Discoverer, Discovery, Prebuilt
from bisector.base import extras, oracle_env
from bisector.base.errors import UsageError
from bisector.base.kinds import BuildPlace
from bisector.base.paths import cache_dir, data_dir
from bisector.infra.owner import owner_id
from bisector.oracle.command import oracle_for
from bisector.oracle.manual import manual_oracle
from bisector.oracle.script import Oracle, bundled_oracles_dir
from bisector.project import history, limits, mirrors
from bisector.project.profiles import PACKAGING, Profile, get_profile
from bisector.run import from_log, torch_place
from bisector.run.config import (
    BuildConfig,
    DockerConfig,
    PlacedPrebuilt,
    Request,
    RunConfig,
    encode,
)
from bisector.run.factory import builder_for, executor_for, judge_for
from bisector.store import answers, bisections
from bisector.store.artifacts import ArtifactStore
from bisector.store.db import Store, Transaction
from bisector.store.runs import Key


@dataclass(frozen=True)
class Prepared:
    """A validated start request: everything checked, nothing written yet."""

    span: history.Range
    oracle: Oracle
    config: RunConfig
    fingerprint: str
    environment: dict[str, Any]
    discovery: Discovery | None = None
    seeding: from_log.Seeding | None = None  # --from-log: the log's marks, stored with it


def env_fingerprint(executor_facts: dict[str, Any], build: dict[str, Any]) -> str:
    blob = json.dumps({"executor": executor_facts, "build": build}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def parse_build_env(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        k, sep, v = pair.partition("=")
        if not sep or not k or not k.replace("_", "").isalnum():
            raise UsageError(f"--build-env {pair!r}: write NAME=VALUE, e.g. USE_DISTRIBUTED=1")
        out[k] = v
    return out


def resolve_cuda_arch(profile: Profile, req: Request) -> str | None:
    """TORCH_CUDA_ARCH_LIST: asked for, else the GPUs the probes will use, else the default.

    None when the profile's build does not use it, so it never splits the cache for nothing.
    """
    if not any("{cuda_arch}" in v for v in profile.build_env.values()):
        return None
    gpus = "all" if req.gpus == "all" else ",".join(req.gpu_list)
    return req.cuda_arch or detect_cuda_arch(gpus) or profile.default_cuda_arch


def check_requires_python(repo: git.Repo, bad_sha: str, python: str, given: bool) -> None:
    """A Python the project says it does not support, refused in one line before anything is
    built (it was accepted silently, and every build or install failed as a skip). Read from
    the bad commit's ``pyproject.toml`` ``[project] requires-python``; nothing to check when
    there is none, it does not parse, or the interpreter cannot say its version."""
    # lazy: only a start or plan reads the project's metadata
    import tomllib

    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        text = repo.git.show(f"{bad_sha}:pyproject.toml")
        spec = tomllib.loads(text).get("project", {}).get("requires-python")
        wanted = SpecifierSet(spec) if isinstance(spec, str) else None
    except (git.GitCommandError, tomllib.TOMLDecodeError, InvalidSpecifier, AttributeError):
        return
    version = python_version(python)
    if wanted is None or version is None or wanted.contains(version, prereleases=True):
        return
    how = "--python" if given else "the Python chosen (pass --python)"
    raise UsageError(f"{how} {python} is Python {version}, and the project at {bad_sha[:12]} "
                     f"requires-python {spec!r}: give an interpreter that fits "
                     f"(--python /path/to/python3.X)")


def python_version(python: str) -> str | None:
    """``3.11.7`` of an interpreter, or None when it cannot say."""

    try:
        r = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                           capture_output=True, text=True, timeout=30, check=False,
                           stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = r.stdout.strip()
    return out if r.returncode == 0 and out[:1].isdigit() else None


# Above ruff's limits on purpose: the checks of a request in the order their errors must come.
def prepare(req: Request, oracles_dir: Path | None = None) -> Prepared:  # noqa: PLR0915
    """Check every input without touching the store, and resolve the run configuration."""
    req.check()
    repo = history.open_repo(req.repo)
    path = req.from_log.resolve() if req.from_log is not None else None
    log = None if path is None else from_log.read(repo, path, req.good, req.bad, req.find_fix)
    good, bad = (log.good, log.bad) if log is not None else (req.good, req.bad)
    if log is not None and log.log.paths and not req.path:  # its start line's "-- PATHS"
        req = replace(req, path=log.log.paths)
    span = history.resolve_range(repo, good, bad, first_parent=not req.ancestry_path,
                                 find_fix=req.find_fix)
    if log is not None:  # shown by the log's refs as typed; searched from its commits
        span = replace(span, good_ref=log.names[0], bad_ref=log.names[1])
    oracle = manual_oracle() if req.manual else oracle_for(
        req.oracle, req.command, timeout=req.timeout, dependencies=req.dependency,
        oracles_dir=oracles_dir, threshold=req.threshold)
    oracle, rules = judge_for(oracle, req.regress, req.find_fix, req.match)
    rules = replace(rules, term_old=req.term_old, term_new=req.term_new)
    refuse_for_performance(req, oracle)
    if oracle.meta.sampled:  # flaky and performance oracles weigh runs with numpy and scipy
        extras.require("perf")
    span = limits.limit_to_paths(repo, span, req.path, first_parent=not req.ancestry_path)
    seeding = None
    if log is not None:
        from_log.refuse_sampled(oracle)
        seeding = from_log.seeding(log, list(span.candidates), rules, oracle, req.manual)
        # The range and the file as resolved: the reproduce line names both.
        req = replace(req, good=good, bad=bad, from_log=path)
    if req.skip:
        skipped = limits.skipped(repo, req.skip, span.candidates)
        seeding = from_log.skipping(skipped, list(span.candidates), req.skip, rules, oracle,
                                    req.manual, seeding)
    if seeding is not None:
        span = replace(span, notes=(*span.notes, *seeding.notes))
    # The user's interpreter, not bisector's own; the note names it in `plan`, `start`, `show`.
    where = torch_place.resolve(repo, span.bad_sha, profile=req.profile, python=req.python,
                                variant=req.variant)
    profile, interpreter, python = where.profile, where.interpreter, where.python
    if profile.probe_tree == "always" and req.executor.sealed:
        chosen = "--profile tree" if req.profile else (
            f"the bad commit {span.bad_sha[:12]} has no Python packaging ({', '.join(PACKAGING)})")
        raise UsageError(f"{chosen}: probes build nothing and run the oracle in each "
                         f"commit's tree, which --executor docker does not do: use "
                         f"--executor local")
    check_requires_python(repo, span.bad_sha, python, given=req.python is not None)
    span = replace(span, notes=(*span.notes, interpreter.note))
    # The oracle environment: what a local run inherits (TORCH_LOGS, TORCHINDUCTOR_*, ...)
    # and --env, stored in the request: the key and the facts hold it, and resume and workers
    # run with it; the names only inherited are recorded too, so the reproduce line and the
    # other commands to type carry --env alone. A container inherits nothing of this shell.
    inherits = {} if req.executor.sealed else os.environ
    req = replace(req, env=oracle_env.resolve(req.env, inherits),
                  inherited=oracle_env.inherited_names(req.env, inherits))
    overrides = parse_build_env(req.build_env)
    profile = replace(profile, build_env={**profile.build_env, **overrides})
    place = req.build_in or req.executor.build_place
    build = BuildConfig(place=place, cuda_arch=resolve_cuda_arch(profile, req),
                        env=overrides, timeout_s=req.build_timeout)
    if place is BuildPlace.DOCKER:
        build = replace(build, image=req.builder_image or build.image,
                        repo_id=repository_id(repo), max_jobs=req.max_jobs,
                        requires=tuple(profile.build_requires))
    docker = DockerConfig(memory=req.memory, pids=req.pids)
    if req.image:
        docker = replace(docker, image=req.image)
    repo_path = str(Path(repo.working_dir).resolve())
    variant = where.variant
    use_index = req.prebuilt and not req.offline and profile.distribution is not None
    nightly = where.index("nightly", req.nightly_index) if use_index else None
    release = where.index("release", req.release_index) if use_index else None
    # A team's oracle ($BISECTOR_ORACLES_DIR) is stored by path: the reproduce line must not
    # depend on a variable set in this shell only.
    bundled = oracle.path.parent == (oracles_dir or bundled_oracles_dir()).resolve()
    # A command and a person (--manual) are no oracle file: ``--oracle`` stays empty.
    spec = "" if req.command or req.manual else oracle.name if bundled else str(oracle.path)
    cfg = RunConfig(
        # Absolute repository and oracle (or a bundled oracle's name): the reproduce line
        # derived from the request then works from any directory.
        request=replace(req, repo=Path(repo_path), oracle=spec),
        repo=repo_path, profile=profile.name, python=python, rules=rules,
        executor=req.executor, docker=docker, build=build, variant=variant,
        nightly_index=(nightly or None) if use_index else None,
        release_index=(release or None) if use_index else None,
        installed=_installed_base(repo, profile, req, python),
        gpus=req.gpu_list, width=req.width, build_jobs=req.build_jobs,
        repo_url=mirrors.checked_url(req.repo_url) if req.repo_url else mirrors.origin(repo),
    )
    executor = executor_for(cfg, labels={"bisector.role": "check"})
    builder = builder_for(cfg)
    why = executor.unready(oracle) or builder.unready()
    if why:
        raise UsageError(why)
    if builder.contained and builder.python_tag != executor.python_tag:
        raise UsageError(
            f"the builder image makes {builder.python_tag} wheels but probes run on "
            f"{executor.python_tag}: build both images on one BASE_IMAGE (make images), or "
            f"--build-in host")
    build_facts = build_settings(profile, python, builder)
    facts = executor.fingerprint_facts()
    models = _gpu_models(req)
    if models:  # a verdict on one GPU model says nothing about another
        facts["gpu_models"] = models
    environment = {"executor": facts, "build": build_facts}
    fingerprint = env_fingerprint(environment["executor"], build_facts)
    # Where this machine keeps things, so a report rendered elsewhere (a shared store, another
    # user) still hides them; not part of the fingerprint.
    environment["paths"] = {"home": str(Path.home()), "data": str(data_dir()),
                            "cache": str(cache_dir())}
    return Prepared(span, oracle, cfg, fingerprint, environment, seeding=seeding)


def refuse_for_performance(req: Request, oracle: Oracle) -> None:
    """A performance oracle's runs are judged by their samples: "bad = worse than the good
    endpoint by the threshold", or with --find-fix "better by the threshold" (the commit that
    made it faster, run/strategies/perf.sought). --regress speaks of exit codes and would be
    silently ignored, so it is refused."""
    if not oracle.meta.performance:
        return
    if req.regress is not None:
        raise UsageError(f"--regress with the performance oracle {oracle.name}: its runs are "
                         f"judged by their samples, not their exit code; drop --regress")


def _gpu_models(req: Request) -> list[str]:
    """The GPU models the probes will run on. ``--gpus`` naming GPUs this machine lacks is
    refused here, before anything is stored (containers see the host's GPUs too)."""
    if req.gpu_model:
        if req.gpus:
            raise UsageError(f"--gpu-model {req.gpu_model!r} with --gpus {req.gpus}: --gpus "
                             f"names this box's GPUs, whose model nvidia-smi gives; drop one")
        if not re.fullmatch(r"[\w .()+/-]{1,100}", req.gpu_model):
            raise UsageError(f"--gpu-model {req.gpu_model[:40]!r}: give the model as "
                             f"nvidia-smi -L names it, e.g. \"NVIDIA H200\"")
        return [req.gpu_model.strip()]
    inventory = gpu_inventory()
    wanted = req.gpu_list
    if inventory is None:
        if req.gpus:
            raise UsageError(f"--gpus {req.gpus}: this machine has no NVIDIA GPU (nvidia-smi "
                             f"finds none); drop --gpus, or use --jobs for parallel CPU probes")
        return []
    have = {idx: name for idx, name, _ in inventory}
    missing = [g for g in wanted if g not in have]
    if missing:
        raise UsageError(f"--gpus {req.gpus}: no GPU {', '.join(missing)} here (this machine "
                         f"has {', '.join(sorted(have)) or 'none'}); see nvidia-smi -L")
    return sorted({have[g] for g in wanted} if wanted else set(have.values()))


def _installed_base(repo: git.Repo, profile: Profile, req: Request,
                    python: str) -> InstalledBase | None:
    if not req.installed_base:
        return None
    sha = history.resolve(repo, req.installed_base, "installed-base")
    roots = tuple(dict.fromkeys(p.split("/")[0] for p in profile.overlay_install))
    site, packages = find_installed(python, roots)
    if not packages:
        raise UsageError(f"--installed-base: {python} has none of {', '.join(roots)} "
                         f"installed; pass --python of the environment that has it")
    return InstalledBase(sha, python, site, packages)


def discover(store: Store, p: Prepared, say: Callable[[str], None] = lambda text: None
             ) -> Prepared:
    """Map the indexes' wheels onto the candidates (cached in the store), before any probe;
    ``say`` is told before each step that waits on an index."""
    cfg = p.config
    if not (cfg.nightly_index or cfg.release_index):
        return p
    repo = history.open_repo(cfg.repo)
    arts = ArtifactStore(store)
    cached = {url: Prebuilt.from_json(d) for url, d in arts.prebuilt_cache().items()}
    cands = list(p.span.candidates)
    found = Discoverer(repo, get_profile(cfg.profile), python_tag(cfg.python), cfg.variant,
                       cached, say=say).discover(cands, nightly_index=cfg.nightly_index,
                                                 release_index=cfg.release_index,
                                                 dates=_date_span(repo, cands))
    arts.remember_prebuilts(pb.to_json() for pb in found.fresh)
    notes = list(p.span.notes)
    kinds = [pb.kind for pb in found.by_position.values()]
    direct = sum(pb.source == DIRECT for pb in found.by_position.values())
    notes.append(f"{len(kinds)} prebuilt wheels inside the range "
                 f"({kinds.count('release')} releases, {kinds.count('nightly')} nightlies"
                 f"{f', {direct} of them by direct URL' if direct else ''})")
    notes.extend(found.notes)
    if found.missing:
        names = ", ".join(pb.filename for pb in found.missing[:5])
        notes.append(f"{len(found.missing)} prebuilt wheels of the range are gone from the "
                     f"index and will not be used: {names}")
    if found.unmapped:
        notes.append(f"{len(found.unmapped)} wheels could not be mapped to a commit "
                     f"(first: {found.unmapped[0].filename}: {found.unmapped[0].reason})")
    placed = tuple(PlacedPrebuilt(pos, pb) for pos, pb in sorted(found.by_position.items()))
    return replace(p, config=replace(cfg, prebuilts=placed),
                   span=replace(p.span, notes=tuple(notes)), discovery=found)


def _date_span(repo: git.Repo, cands: list[str]) -> tuple[date, date]:
    stamps = [int(repo.git.show("-s", "--format=%ct", sha)) for sha in (cands[0], cands[-1])]
    days = [datetime.fromtimestamp(t, UTC).date() for t in stamps]
    return min(days), max(days)


def record(store: Store, p: Prepared) -> int:
    """Store the oracle, the bisection and its frozen candidate list; owned by this process."""
    oracle, span, seeding = p.oracle, p.span, p.seeding
    for o in (oracle, *((seeding.oracle,) if seeding is not None else ())):
        bisections.save_oracle(store, o.sha256, o.name, o.content.decode("utf-8"),
                               o.stored_meta())

    def seed(s: Transaction, bisection_id: int) -> None:
        if seeding is not None and seeding.seeds:
            answers.seed(s, bisection_id, Key(seeding.oracle.sha256, p.fingerprint),
                         seeding.seeds)

    return bisections.create(
        store, candidates=span.candidates, owner=owner_id(), repo_path=p.config.repo,
        good_ref=span.good_ref, bad_ref=span.bad_ref, good_sha=span.good_sha,
        bad_sha=span.bad_sha, oracle_name=oracle.name, oracle_sha256=oracle.sha256,
        polarity=p.config.rules.polarity.value, env_fingerprint=p.fingerprint,
        environment=p.environment, settings=encode(p.config), notes=list(span.notes),
        then=seed)
