"""The extras (base/extras.py): a missing module of one is a one-line error naming the install;
any other missing module stays a bug with its traceback."""

from __future__ import annotations

import pytest

from bisector.base import extras
from bisector.base.errors import UsageError

pytestmark = pytest.mark.unit


def test_a_missing_module_of_an_extra_names_the_install() -> None:
    line = extras.missing_extra(ModuleNotFoundError(name="scipy.stats"))
    assert line is not None and "[perf] extra" in line and "pip install 'bisector[perf]'" in line
    assert "bisect serve" in (extras.missing_extra(ModuleNotFoundError(name="uvicorn")) or "")
    assert extras.missing_extra(ModuleNotFoundError(name="yaml")) is None


def test_require_refuses_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    extras.require("perf")  # installed here: nothing to say
    monkeypatch.setitem(extras.EXTRA_OF, "bisector_no_such_module", ("perf", "a test"))
    with pytest.raises(UsageError, match=r"\[perf\] extra, for a test \(bisector_no_such_"):
        extras.require("perf")
    extras.require("web")
