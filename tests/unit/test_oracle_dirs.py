"""Where ``--oracle NAME`` looks: $BISECTOR_ORACLES_DIR (a team's own), then the bundled ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from bisector.base.errors import OracleError
from bisector.oracle.script import bundled_oracles_dir, list_oracles, oracle_dirs, resolve_oracle


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "team"
    d.mkdir()
    monkeypatch.setenv("BISECTOR_ORACLES_DIR", str(d))
    return d


def test_without_the_variable_only_the_bundled_oracles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BISECTOR_ORACLES_DIR", raising=False)
    assert oracle_dirs() == [bundled_oracles_dir()]
    assert resolve_oracle("torchlet_norm") == (bundled_oracles_dir() / "torchlet_norm.py").resolve()


def test_a_team_oracle_resolves_by_name_and_the_bundled_ones_still_do(team: Path) -> None:
    (team / "ours.py").write_text("print(1)\n")
    assert resolve_oracle("ours") == (team / "ours.py").resolve()
    assert resolve_oracle("torchlet_norm").parent == bundled_oracles_dir().resolve()


def test_a_team_oracle_shadows_a_bundled_one_of_the_same_name(team: Path) -> None:
    (team / "torchlet_norm.py").write_text('"""Ours."""\n')
    assert resolve_oracle("torchlet_norm") == (team / "torchlet_norm.py").resolve()
    found = [o for o in list_oracles() if o.name == "torchlet_norm"]
    assert [o.path for o in found] == [(team / "torchlet_norm.py").resolve()]


def test_listing_puts_the_team_first(team: Path) -> None:
    (team / "zz_ours.py").write_text('"""Ours."""\n')
    names = [o.name for o in list_oracles()]
    assert names[0] == "zz_ours" and "torchlet_norm" in names


def test_an_unknown_name_names_every_directory_searched(team: Path) -> None:
    with pytest.raises(OracleError) as e:
        resolve_oracle("absent")
    assert str(team.resolve()) in e.value.message
    assert str(bundled_oracles_dir().resolve()) in e.value.message


def test_a_name_never_climbs_out_of_the_team_directory(team: Path) -> None:
    (team.parent / "secret.py").write_text("print(2)\n")
    with pytest.raises(OracleError):
        resolve_oracle("../secret")


def test_an_explicit_directory_replaces_the_search(team: Path, tmp_path: Path) -> None:
    (team / "ours.py").write_text("print(1)\n")
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(OracleError, match="no oracle named"):
        resolve_oracle("ours", other)
