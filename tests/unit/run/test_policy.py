"""The command's policy (run/policy.py): ``--artifacts``, ``$BISECTOR_ARTIFACTS`` and the user's
``bisector.toml`` weighed once, at one point, into a value handed down; nothing set in
``os.environ`` for our own code to read back; the object store's "down, retry later" memory is
the process's."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from bisector.app.tasks import Host
from bisector.artifacts import remote
from bisector.base.errors import UsageError
from bisector.base.events import QuietEvents
from bisector.core.verdict import Rules
from bisector.infra.owner import owner_id
from bisector.run import factory
from bisector.run.config import RunConfig, encode
from bisector.run.policy import ENV, LOCAL, Policy, resolve
from bisector.run.request import Request
from bisector.store import bisections
from bisector.store.db import Store, open_store
from tests.support import invoke, one_line_error
from tests.unit.fakes import ORACLE, shas


def test_the_command_line_wins_then_the_variable_then_the_users_file() -> None:
    mine = remote.parse("s3://from-file/p")
    assert resolve("s3://from-flag/p", {ENV: "s3://from-env/p"}, mine).artifacts == \
        remote.parse("s3://from-flag/p")
    assert resolve(None, {ENV: "s3://from-env/p"}, mine).artifacts == \
        remote.parse("s3://from-env/p")
    assert resolve(None, {ENV: ""}, mine).artifacts == mine  # set but empty: not given
    assert resolve(None, {}, None) == LOCAL == Policy()


@pytest.mark.parametrize(("flag", "environ", "named"), [
    ("https://bucket/x", {}, "--artifacts 'https://bucket/x'"),
    (None, {ENV: "s3://b/../x"}, f"${ENV} 's3://b/../x'"),
])
def test_a_bad_url_names_where_it_came_from(flag: str | None, environ: dict[str, str],
                                            named: str) -> None:
    with pytest.raises(UsageError, match=named.replace("$", r"\$").replace(".", r"\.")):
        resolve(flag, environ)


@pytest.fixture
def clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home with no bisector.toml and no $BISECTOR_ARTIFACTS; a store in it."""
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("BISECTOR_CONFIG", raising=False)
    db = tmp_path / "b.db"
    open_store(str(db))
    return db


def test_artifacts_on_the_command_line_reach_the_use_case_and_leave_the_environment_alone(
        clean: Path) -> None:
    before = dict(os.environ)
    r = invoke("--db", str(clean), "--artifacts", "s3://team-wheels/p", "du", "--json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["bucket"]["bucket"] == "s3://team-wheels/p"
    assert dict(os.environ) == before  # not $BISECTOR_ARTIFACTS, nor anything else
    # The next command of this process is not told what the last one was given.
    again = invoke("--db", str(clean), "du", "--json")
    assert "bucket" not in json.loads(again.stdout), again.stdout


def test_the_users_file_names_the_bucket_when_nothing_else_does(clean: Path) -> None:
    cfg = clean.parent / "config" / "bisector.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[artifacts]\nurl = "s3://from-file/p"\n')
    r = invoke("--db", str(clean), "du", "--json")
    assert json.loads(r.stdout)["bucket"]["bucket"] == "s3://from-file/p", r.stdout
    r = invoke("--db", str(clean), "du", "--json", env={ENV: "s3://from-env/p"})
    assert json.loads(r.stdout)["bucket"]["bucket"] == "s3://from-env/p", r.stdout


@pytest.mark.parametrize(("args", "env", "toml", "needle"), [
    (("--artifacts", "https://bucket/x"), {}, None, "--artifacts 'https://bucket/x' is not"),
    ((), {ENV: "bucket"}, None, f"${ENV} 'bucket' is not an object store URL"),
    ((), {}, '[artifacts]\nurl = "s3://x"\n', "[artifacts] url 's3://x' is not"),
    ((), {}, "[artifacts]\nurl = 3\n", "[artifacts] url must be a string"),
])
def test_a_bad_object_store_is_one_line_before_anything_runs(
        clean: Path, args: tuple[str, ...], env: dict[str, Any], toml: str | None,
        needle: str) -> None:
    if toml is not None:
        cfg = clean.parent / "config" / "bisector.toml"
        cfg.parent.mkdir(parents=True)
        cfg.write_text(toml)
    one_line_error(invoke("--db", str(clean), *args, "du", env=env), needle, 2)


def _refusing_port() -> int:
    """A port of 127.0.0.1 nothing listens on: a store that is down refuses as it does."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_providers_in_one_process_share_the_stores_down_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One provider's failure leaves the store alone for the next provider of the process
    (a worker's next task, a command's second commit) too: no new wait on a dead store."""
    for k, v in {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{_refusing_port()}",
                 "AWS_ACCESS_KEY_ID": "bisector-test", "AWS_SECRET_ACCESS_KEY": "test",
                 "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(k, v)
    policy = Policy(remote.parse(f"s3://down-{os.getpid()}-{id(tmp_path)}/p"))
    first = factory.remote_for(policy, QuietEvents())
    second = factory.remote_for(policy, QuietEvents())
    assert first is not None and second is not None and first is not second
    assert first.usable() and second.usable()
    assert not first.fetch("p/sha256/" + "0" * 64, "0" * 64, tmp_path / "w.whl")
    assert not second.usable()  # made before the failure: it still knows
    third = factory.remote_for(policy, QuietEvents())
    assert third is not None and not third.usable()
    # Another bucket of the same process is not held down by this one.
    other = factory.remote_for(Policy(remote.parse("s3://another-bucket/p")), QuietEvents())
    assert other is not None and other.usable()
    assert factory.remote_for(LOCAL, QuietEvents()) is None


def test_a_workers_tasks_are_made_with_the_worker_commands_policy(store: Store,
                                                                    tmp_path: Path) -> None:
    """``bisect worker --artifacts ...`` (or its variable, or the user's file): every task's
    provider gets the bucket the worker command resolved, not one read again per task."""
    cands = shas(6)
    cfg = RunConfig(Request(good=cands[0], bad=cands[-1], oracle=ORACLE.name, repo=tmp_path),
                    repo=str(tmp_path), profile="generic", python="python3", rules=Rules())
    bisections.save_oracle(store, ORACLE.sha256, ORACLE.name, ORACLE.content.decode(), {})
    bid = bisections.create(
        store, candidates=cands, owner=owner_id(), repo_path=str(tmp_path), good_ref="good",
        bad_ref="bad", good_sha=cands[0], bad_sha=cands[-1], oracle_name=ORACLE.name,
        oracle_sha256=ORACLE.sha256, polarity=cfg.rules.polarity.value,
        env_fingerprint="env0", environment={}, settings=encode(cfg), notes=[])
    policy = Policy(remote.parse("s3://team-wheels/worker"))
    host = Host(store, gpu=None, name="box", say=lambda _line: None, policy=policy)
    assert host.context(bid).parts.policy is policy
    assert Host(store, gpu=None, name="box", say=lambda _line: None).context(
        bid).parts.policy == LOCAL
