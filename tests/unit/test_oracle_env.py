"""The oracle environment: which variables are recorded and keyed, how secrets are kept out of
sight, and that a bad --env is refused in one line."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from bisector.base import oracle_env
from bisector.base.errors import UsageError
from bisector.cli import start
from bisector.executors.local import LocalExecutor, SystemExecutor
from bisector.run.config import Request, reproduce_command, request_from

pytestmark = pytest.mark.unit

SHELL = {"TORCH_LOGS": "recompiles", "TORCHINDUCTOR_FREEZING": "1", "TRITON_DEBUG": "1",
         "TORCHDYNAMO_REPRO_AFTER": "aot", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
         "CUDA_LAUNCH_BLOCKING": "1", "CUDA_VISIBLE_DEVICES": "1", "CUDA_HOME": "/usr/local/cuda",
         "TRITON_CACHE_DIR": "/tmp/t", "HOME": "/home/x", "PATH": "/bin", "TORCHX": "no"}


def test_inherited_takes_the_behaviour_prefixes_and_leaves_host_paths_and_placement() -> None:
    assert oracle_env.inherited(SHELL) == {
        "CUDA_LAUNCH_BLOCKING": "1", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHINDUCTOR_FREEZING": "1",
        "TORCH_LOGS": "recompiles", "TRITON_DEBUG": "1"}


def test_given_overrides_inherited_and_words_are_sorted() -> None:
    words = oracle_env.resolve(("TORCH_LOGS=+dynamo", "MY_FLAG=1", "CUDA_HOME=/opt/c"),
                               {"TORCH_LOGS": "recompiles", "TRITON_DEBUG": "1"})
    assert words == ("CUDA_HOME=/opt/c", "MY_FLAG=1", "TORCH_LOGS=+dynamo", "TRITON_DEBUG=1")


def test_apply_replaces_the_hosts_behaviour_variables_only() -> None:
    env = oracle_env.apply(SHELL, {"TORCH_LOGS": "graph_breaks"})
    assert env["TORCH_LOGS"] == "graph_breaks"
    assert "TORCHINDUCTOR_FREEZING" not in env and "TRITON_DEBUG" not in env
    assert env["CUDA_HOME"] == "/usr/local/cuda" and env["PATH"] == "/bin"


@pytest.mark.parametrize(("word", "needle"), [
    ("TORCH_LOGS", "write NAME=VALUE"), ("=x", "write NAME=VALUE"),
    ("1X=y", "write NAME=VALUE"), ("A-B=1", "write NAME=VALUE"),
    ("BISECTOR_COMMIT=x", "bisector sets BISECTOR_*"),
])
def test_bad_words_are_one_line_usage_errors(word: str, needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as e:
        oracle_env.parse([word])
    assert "\n" not in e.value.message
    with pytest.raises(UsageError, match=needle):
        Request("a", "b", "o", env=(word,)).check()


def test_a_secret_is_a_hash_in_the_key_and_masked_where_shown() -> None:
    env = {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "TORCH_LOGS": "recompiles"}
    key = oracle_env.keyed(env)
    assert key["TORCH_LOGS"] == "recompiles"
    assert key["HF_TOKEN"].startswith("sha256:") and "hf_abc" not in key["HF_TOKEN"]
    other = oracle_env.keyed({**env, "HF_TOKEN": "hf_zzzzzzzzzzzzzzzzzzzzzzzz"})
    assert other["HF_TOKEN"] != key["HF_TOKEN"]  # another token, another key
    assert oracle_env.shown(env) == {"HF_TOKEN": "***", "TORCH_LOGS": "recompiles"}
    assert oracle_env.word("my_secret=abc") == "my_secret=***"


def test_the_key_differs_with_the_logs_on_and_is_unchanged_without_any() -> None:
    bare = LocalExecutor("/usr/bin/python3", "torch").fingerprint_facts()
    assert "oracle_env" not in bare  # runs stored before there was an oracle env: same key
    assert LocalExecutor("/usr/bin/python3", "torch", env={}).fingerprint_facts() == bare
    logs = LocalExecutor("/usr/bin/python3", "torch",
                         env={"TORCH_LOGS": "recompiles"}).fingerprint_facts()
    assert logs != bare and logs["oracle_env"] == {"TORCH_LOGS": "recompiles"}
    sys_facts = SystemExecutor("/py", None, env={"K_TOKEN": "s"}).fingerprint_facts()
    assert sys_facts["oracle_env"]["K_TOKEN"].startswith("sha256:")


def test_reproduce_line_carries_env_masks_secrets_and_parses_back() -> None:
    req = Request("a", "b", "o", repo=Path("/r"),
                  env=("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz", "TORCH_LOGS=recompiles"))
    line = reproduce_command(req)
    assert "--env TORCH_LOGS=recompiles" in line and "--env 'HF_TOKEN=***'" in line
    assert "hf_abc" not in line
    ctx = start.make_context("start", shlex.split(line)[2:])
    assert request_from(dict(ctx.params)).env == ("HF_TOKEN=***", "TORCH_LOGS=recompiles")
