"""Fixtures of the runner-logic tests: a real SQLite store, migrated once per session and
copied for each test (running the migrations per test would cost more than the tests)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bisector.store.db import Store, open_store


@pytest.fixture(scope="session")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "store.db"
    open_store(str(path)).engine.dispose()
    return path


@pytest.fixture
def store(migrated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Store]:
    monkeypatch.setenv("BISECTOR_HOME", str(tmp_path / "home"))
    shutil.copy(migrated, tmp_path / "store.db")
    s = open_store(str(tmp_path / "store.db"))
    yield s
    s.engine.dispose()
