"""A command's object store reaches the providers it makes as a value (run/policy.py), from the
command line or the user's ``bisector.toml`` read once, and never through ``os.environ``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from bisector.app.demo.torchlet import SyntheticHistory
from bisector.artifacts.provider import Provider
from bisector.run import factory
from bisector.run.policy import ENV, Policy
from tests.support import invoke


@pytest.fixture
def given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Policy]:
    """Every policy a provider of the command is made with, in order (the real provider
    is still made: the plan goes on)."""
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.delenv("BISECTOR_CONFIG", raising=False)
    seen: list[Policy] = []
    real = factory.provider_for

    def spy(*args: Any) -> Provider:
        seen.append(args[-1])
        return real(*args)

    monkeypatch.setattr(factory, "provider_for", spy)
    return seen


def _plan(world: SyntheticHistory, db: Path, *flags: str) -> None:
    r = invoke("--db", str(db), *flags, "plan", "--repo", str(world.path), "--good",
               world.main[0], "--bad", world.main[-1], "--oracle", "torchlet_norm", "--json")
    assert r.exit_code == 0, r.stderr


def test_artifacts_on_the_command_line_reach_the_provider_not_the_environment(
        world: SyntheticHistory, tmp_path: Path, given: list[Policy]) -> None:
    before = dict(os.environ)
    _plan(world, tmp_path / "b.db", "--artifacts", "s3://team-wheels/plan")
    assert [p.artifacts.url if p.artifacts else None for p in given] == \
        ["s3://team-wheels/plan"]
    assert dict(os.environ) == before


def test_the_users_file_is_read_once_a_command(world: SyntheticHistory, tmp_path: Path,
                                                given: list[Policy],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "home" / "config" / "bisector.toml"
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[artifacts]\nurl = "s3://team-wheels/toml"\n')
    reads: list[Path] = []
    read_bytes = Path.read_bytes

    def counted(self: Path) -> bytes:
        if self.name == "bisector.toml":
            reads.append(self)
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", counted)
    _plan(world, tmp_path / "b.db")
    assert [p.artifacts.url if p.artifacts else None for p in given] == \
        ["s3://team-wheels/toml"]
    assert reads == [cfg]


def test_start_hands_its_object_store_to_the_runs_provider(
        world: SyntheticHistory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """start -> the app's run -> the opened bisection's parts -> its provider: the bucket of
    ``--artifacts`` all the way (stopped there: the search itself is not this test's)."""
    from bisector.base.errors import UsageError

    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(ENV, raising=False)
    seen: list[Policy] = []

    def stop(*args: Any) -> Provider:
        seen.append(args[-1])
        raise UsageError("stopped by the test once the provider is asked for")

    monkeypatch.setattr(factory, "provider_for", stop)
    before = dict(os.environ)
    r = invoke("--db", str(tmp_path / "b.db"), "--artifacts", "s3://team-wheels/start",
               "start", "--repo", str(world.path), "--good", world.main[0], "--bad",
               world.main[-1], "--oracle", "torchlet_norm", "--no-confirm")
    assert "stopped by the test" in r.stderr, r.stderr
    assert [p.artifacts.url if p.artifacts else None for p in seen] == \
        ["s3://team-wheels/start"]
    assert dict(os.environ) == before
