"""The run configuration: one codec, one set of defaults, a reproduce line that loses nothing."""

from __future__ import annotations

import json
import shlex
from dataclasses import fields, replace
from pathlib import Path

import pytest

from bisector.artifacts.installable import InstalledBase
from bisector.artifacts.prebuilt import Prebuilt
from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.kinds import BuildPlace, ExecutorKind, PriorMode
from bisector.cli import start
from bisector.core.verdict import Polarity, Rules, TimeoutRule
from bisector.run.config import (
    BuildConfig,
    DockerConfig,
    PlacedPrebuilt,
    Request,
    RunConfig,
    decode,
    encode,
    reproduce_command,
    request_from,
)
from bisector.run.reproduce import SPEED_ONLY

EVERYTHING = Request(
    good="v2.8.0", bad="v2.9.1", oracle="/abs/oracle.py", repo=Path("/src/pytorch"),
    repo_url="https://example.invalid/pytorch.git",
    find_fix=True, regress=Polarity.SUCCESS, ancestry_path=True, into_merge=False,
    compiler_bisect=False,
    profile="pytorch",
    python="/usr/bin/python3.12", offline=True, build_timeout=99.0, prebuilt=False,
    nightly_index="http://127.0.0.1:1/whl/nightly/cu128", release_index="", variant="cu126",
    installed_base="v2.9.0", executor=ExecutorKind.DOCKER, image="rt:1", gpus="0,1",
    gpu_model="NVIDIA H200",
    memory="8g", pids=64, build_in=BuildPlace.HOST, builder_image="b:1", cuda_arch="9.0",
    max_jobs=3, build_env=("USE_DISTRIBUTED=1", "X=y z"), jobs=2, build_jobs=2, prefetch=0,
    confirm=False, reconfirm=True,
    match=r"NameError: .*_Runner__", any_failure=True, timeout=30.0, threshold="5%",
    dependency=("pytest", "expecttest>=0.2"),
    env=("TORCH_LOGS=+dynamo,recompiles", "MY_FLAG=a b", "TORCH_SYMM_MEM_DISABLE_MULTICAST=1"),
    inherited=("TORCH_SYMM_MEM_DISABLE_MULTICAST",),
    command=("python", "test/x.py", "-k", "it's"), manual=True, prior=PriorMode.NONE,
    from_log=Path("/abs/bisect log.txt"), path=("torch/_inductor/", "a b.py"),
    skip=("v2.8.1..v2.8.2", "abc123"), term_old="fast", term_new="slow",
    bad_shown="the watch's series: +50.0 % between the builds (p 0.0095)",
)


def test_every_field_differs_from_its_default_in_the_fixture() -> None:
    for f in fields(Request):
        if f.name not in ("good", "bad", "oracle"):
            assert getattr(EVERYTHING, f.name) != f.default, f.name


def test_reproduce_parses_back_to_the_same_request() -> None:
    """Every option that can change the result is on the line; only speed options are not,
    nor the variables the run inherited, nor what a watch's series showed (no option the user
    gave: a search started by hand checks its bad endpoint itself)."""
    line = reproduce_command(EVERYTHING)
    args = shlex.split(line)
    assert args[:2] == ["bisect", "start"]
    assert "TORCH_SYMM_MEM_DISABLE_MULTICAST" not in line
    ctx = start.make_context("start", args[2:])
    again = request_from(dict(ctx.params))
    expected = replace(EVERYTHING, **{n: getattr(Request("g", "b", "o"), n)
                                      for n in SPEED_ONLY}, env=EVERYTHING.env[:2],
                       inherited=(), bad_shown="")
    assert again == expected


def test_defaults_reproduce_as_the_short_line() -> None:
    req = Request(good="a", bad="b", oracle="name_mangling", repo=Path("/r"))
    assert reproduce_command(req) == ("bisect start --repo /r --good a --bad b "
                                      "--oracle name_mangling")


def test_the_cli_defaults_are_the_config_defaults() -> None:
    ctx = start.make_context("start", ["--good", "a", "--bad", "b", "--oracle", "x"])
    assert request_from(dict(ctx.params)) == Request(good="a", bad="b", oracle="x")
    assert Request("a", "b", "x").memory == defaults.MEMORY == DockerConfig().memory


def test_codec_round_trip_through_json() -> None:
    cfg = RunConfig(
        request=EVERYTHING, repo="/src/pytorch", profile="pytorch", python="/usr/bin/python3",
        rules=Rules(Polarity.SUCCESS, True, TimeoutRule.BAD), executor=ExecutorKind.DOCKER,
        docker=DockerConfig("rt:1", "8g", 64),
        build=BuildConfig(BuildPlace.DOCKER, "b:1", "abc", "9.0", 3, {"A": "1"}, ("wheel",),
                          99.0),
        variant="cu126", nightly_index="http://127.0.0.1:1/n", release_index=None,
        installed=InstalledBase("f" * 40, "/py", "/site", ("torch",)),
        prebuilts=(PlacedPrebuilt(3, Prebuilt("nightly", "t.whl", "http://x/t.whl", "2.9",
                                              None, "a" * 40, requires=["triton==3.6"])),),
        gpus=("0", "1"), width=2, build_jobs=2, repo_url="git://127.0.0.1:1/t.git")
    assert decode(json.loads(json.dumps(encode(cfg)))) == cfg


def test_a_bisection_stored_by_the_first_version_still_decodes() -> None:
    legacy = {"repo": "/r", "profile": "torchlet", "python": "/py", "offline": False,
              "build_timeout": 60.0, "first_parent": False, "find_fix": True,
              "reproduce": "bisect start ...", "variant": None, "nightly_index": None,
              "release_index": None, "prebuilts": [], "installed": None,
              "executor": "docker", "docker": {"image": "rt", "gpus": "0", "memory": "4g",
                                               "pids": 10},
              "build": {"in": "host", "cuda_arch": None, "env": {}}}
    cfg = decode(legacy)
    assert cfg.executor is ExecutorKind.DOCKER and cfg.docker.pids == 10
    assert cfg.request.ancestry_path and cfg.request.find_fix and cfg.build.timeout_s == 60.0


def test_a_bisection_stored_before_the_failure_hunted_keeps_gits_rule() -> None:
    """Stored before ``any_failure`` existed, a bisection was judged by git's rule (every
    failure bad): its resume goes on under that rule, a new one hunts one failure."""
    cfg = RunConfig(request=Request("a", "b", "o"), repo="/r", profile="torchlet",
                    python="/py", rules=Rules())
    stored = encode(cfg)
    assert decode(stored).request.any_failure is False
    del stored["request"]["any_failure"]
    assert decode(stored).request.any_failure is True


@pytest.mark.parametrize(("kw", "needle"), [
    ({"gpus": "0,x"}, "--gpus"), ({"gpus": "0,0"}, "--gpus"), ({"jobs": 0}, "--jobs"),
    ({"gpus": "0,1", "jobs": 3}, "one probe runs per GPU"), ({"build_jobs": 0}, "--build-jobs"),
    ({"installed_base": "v1", "executor": ExecutorKind.DOCKER}, "--executor local"),
])
def test_option_combinations_that_cannot_work(kw: dict[str, object], needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        replace(Request("a", "b", "o"), **kw).check()  # type: ignore[arg-type]


def test_width_is_one_probe_per_gpu_unless_jobs_says_otherwise() -> None:
    assert Request("a", "b", "o").width == 1
    assert Request("a", "b", "o", gpus="0,1,2").width == 3
    assert Request("a", "b", "o", gpus="0,1,2", jobs=2).width == 2
    assert Request("a", "b", "o", jobs=4).width == 4
