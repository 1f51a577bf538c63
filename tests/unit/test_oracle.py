"""The oracle kit: metadata, name resolution, polarity, and the run classification table."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from bisector.base.errors import OracleError
from bisector.core.search import Verdict
from bisector.core.verdict import Outcome, Polarity, Rules, TimeoutRule, classify
from bisector.oracle.script import load_oracle, parse_metadata, resolve_oracle

META = """\
# /// script
# dependencies = ["numpy>=1.26"]
# requires-python = ">=3.10"
# [tool.bisector]
# description = "checks a thing"
# timeout = 30
# on-timeout = "bad"
# needs-gpu = true
# env = { TORCHINDUCTOR_FORCE_DISABLE_CACHES = "1" }
# ///
print("hi")
"""


def test_full_metadata_parses() -> None:
    meta = parse_metadata(META)
    assert meta.dependencies == ("numpy>=1.26",)
    assert meta.requires_python == ">=3.10"
    assert meta.description == "checks a thing"
    assert meta.timeout == 30.0
    assert meta.on_timeout is TimeoutRule.BAD
    assert meta.needs_gpu is True
    assert meta.env == {"TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}


def test_docstring_is_the_default_description() -> None:
    assert parse_metadata('"""First line.\n\nMore."""\n').description == "First line."


@pytest.mark.parametrize("oracle_polarity", ["failure", "success"])
@pytest.mark.parametrize("regress", [None, Polarity.FAILURE, Polarity.SUCCESS])
def test_on_timeout_bad_is_bad_whatever_the_polarity(oracle_polarity: str,
                                                     regress: Polarity | None) -> None:
    """A hang that is the bug stays the bug under --regress success (it was judged good), and
    under find-fix it is the old behaviour, so the search calls it good."""
    text = META.replace('# timeout = 30', f'# timeout = 30\n# polarity = "{oracle_polarity}"')
    meta = parse_metadata(text)
    rules = Rules(regress or meta.polarity, False, meta.on_timeout)
    assert rules.judge(Outcome.TIMEOUT) is Verdict.BAD
    assert Rules(regress or meta.polarity, True, meta.on_timeout).judge(
        Outcome.TIMEOUT) is Verdict.GOOD
    assert Rules(meta.polarity, False, TimeoutRule.GOOD).judge(Outcome.TIMEOUT) is Verdict.GOOD
    assert Rules(meta.polarity, False, TimeoutRule.SKIP).judge(Outcome.TIMEOUT) is Verdict.SKIP


@pytest.mark.parametrize(
    ("line", "needle"),
    [
        ("# timeout = -1", "timeout must be a positive"),
        ('# timeout = "soon"', "timeout has the wrong type"),
        ('# on-timeout = "maybe"', "on-timeout must be"),
        ('# polarity = "up"', "polarity must be"),
        ("# colour = 1", "unknown key(s) colour"),
        ("# repeats = 0", "repeats must be at least 1"),
        ("# timeout = = 3", "not valid TOML"),
        ("# env = { A = 1 }", "env values must be strings"),
    ],
)
def test_malformed_metadata_is_named(line: str, needle: str) -> None:
    text = f"# /// script\n# [tool.bisector]\n{line}\n# ///\n"
    with pytest.raises(OracleError, match=None) as e:
        parse_metadata(text, "x.py")
    assert needle in e.value.message and e.value.message.startswith("x.py:")


def test_two_blocks_are_refused() -> None:
    block = "# /// script\n# dependencies = []\n# ///\n"
    with pytest.raises(OracleError, match="more than one"):
        parse_metadata(block + block)


def test_name_resolves_inside_the_oracles_dir_only(tmp_path: Path) -> None:
    d = tmp_path / "oracles"
    d.mkdir()
    (d / "ok.py").write_text("print(1)\n")
    (tmp_path / "secret.py").write_text("print(2)\n")
    assert resolve_oracle("ok", d) == (d / "ok.py").resolve()
    for bad in ("../secret", "..", "a/../../secret"):
        with pytest.raises(OracleError):
            resolve_oracle(bad, d)
    (d / "link.py").symlink_to(tmp_path / "secret.py")
    with pytest.raises(OracleError, match="no oracle named"):
        resolve_oracle("link", d)


def test_explicit_path_and_missing_file(tmp_path: Path) -> None:
    f = tmp_path / "mine.py"
    f.write_text("print(1)\n")
    o = load_oracle(str(f))
    assert o.name == "mine" and len(o.sha256) == 64
    with pytest.raises(OracleError, match="does not exist"):
        resolve_oracle(str(tmp_path / "nope.py"))


def test_content_hash_changes_with_content(tmp_path: Path) -> None:
    f = tmp_path / "o.py"
    f.write_text("print(1)\n")
    a = load_oracle(str(f)).sha256
    f.write_text("print(2)\n")
    assert load_oracle(str(f)).sha256 != a


@pytest.mark.parametrize(
    ("outcome", "polarity", "find_fix", "verdict"),
    [
        (Outcome.PASS, Polarity.FAILURE, False, Verdict.GOOD),
        (Outcome.FAIL, Polarity.FAILURE, False, Verdict.BAD),
        (Outcome.PASS, Polarity.SUCCESS, False, Verdict.BAD),
        (Outcome.FAIL, Polarity.SUCCESS, False, Verdict.GOOD),
        (Outcome.SKIP, Polarity.SUCCESS, False, Verdict.SKIP),
        (Outcome.PASS, Polarity.FAILURE, True, Verdict.BAD),  # fixed: the new behaviour
        (Outcome.FAIL, Polarity.FAILURE, True, Verdict.GOOD),
        (Outcome.PASS, Polarity.SUCCESS, True, Verdict.GOOD),
        (Outcome.SKIP, Polarity.FAILURE, True, Verdict.SKIP),
        (Outcome.TIMEOUT, Polarity.FAILURE, False, Verdict.SKIP),  # on-timeout: skip
    ],
)
def test_polarity(outcome: Outcome, polarity: Polarity, find_fix: bool,
                  verdict: Verdict) -> None:
    assert Rules(polarity, find_fix).judge(outcome) is verdict


@pytest.mark.parametrize(
    ("rc", "timed_out", "oom", "expected", "reusable"),
    [
        (0, False, False, Outcome.PASS, True),
        (1, False, False, Outcome.FAIL, True),
        (127, False, False, Outcome.FAIL, True),
        (125, False, False, Outcome.SKIP, True),
        (128, False, False, Outcome.SKIP, False),
        (-signal.SIGKILL, False, False, Outcome.SKIP, False),
        (None, True, False, Outcome.TIMEOUT, False),
        (137, False, True, Outcome.SKIP, False),
    ],
)
def test_classify(rc: int | None, timed_out: bool, oom: bool, expected: Outcome,
                  reusable: bool) -> None:
    c = classify(rc, timed_out=timed_out, oom_killed=oom)
    assert c.outcome is expected and c.reusable is reusable and c.reason


def test_timeout_can_count_as_bad_when_the_oracle_says_so() -> None:
    c = classify(None, timed_out=True, timeout_s=9)
    assert c.outcome is Outcome.TIMEOUT and "9s" in c.reason and not c.reusable
    assert Rules(on_timeout=TimeoutRule.BAD).judge(c.outcome) is Verdict.BAD


def test_structured_result_is_the_last_result_line(tmp_path: Path) -> None:
    from bisector.executors.oracle_run import structured_result

    out = tmp_path / "stdout.txt"
    out.write_text('noise\nBISECTOR_RESULT {"median": 1.0}\nBISECTOR_RESULT {"median": 2.5, '
                   '"samples": [2, 3]}\nbye\n')
    assert structured_result(out) == {"median": 2.5, "samples": [2, 3]}
    out.write_text("BISECTOR_RESULT not json\n")
    assert structured_result(out) == {"unparsed": "not json"}
    out.write_text("nothing structured\n")
    assert structured_result(out) is None


def perf_meta(extra: str) -> str:
    return f'# /// script\n# [tool.bisector]\n# threshold = "5%"\n{extra}# ///\n'


@pytest.mark.parametrize("line", [
    "flaky = true", "repeats = 3", "false-positive = 0.1", "false-negative = 0.0",
    "confidence = 0.9",
])
def test_a_performance_oracle_refuses_the_flaky_keys(line: str) -> None:
    key = line.split(" =")[0]
    with pytest.raises(OracleError, match=f"threshold and {key} do not go together: .*drop "
                                          f"{key}$"):
        parse_metadata(perf_meta(f"# {line}\n"))


def test_a_performance_oracle_is_not_noisy() -> None:
    # The harmless spellings of "not flaky" stay accepted; max-runs is runs per commit.
    meta = parse_metadata(perf_meta("# flaky = false\n# repeats = 1\n# max-runs = 4\n"))
    assert meta.performance and meta.sampled and not meta.noisy and meta.max_runs == 4
