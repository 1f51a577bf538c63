"""The pure parts of the issue and HTML reports: nightlies around the culprit, portable
reproduce lines, path scrubbing, the timeline's geometry and escaping."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from bisector.app.report import html as html_report
from bisector.app.report import issue as issue_report
from bisector.app.report import portable
from bisector.app.report import show as report
from bisector.base.escape import fence
from bisector.run.config import Request, reproduce_command


def _probe(seq: int, pos: int, verdict: str, seconds: float = 1.0, **kw: Any) -> dict[str, Any]:
    return {"seq": seq, "position": pos, "sha": f"{pos:040x}", "verdict": verdict,
            "reused": False, "duration_s": seconds, "reason": "exit 0", "facts": {},
            "subject": kw.pop("subject", f"commit {pos}"), **kw}


def _data(**kw: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "id": 3, "state": "done", "repo": "/home/someone/src/pytorch", "candidates": 101,
        "terms": {"old": "good", "new": "bad"}, "result": {"kind": "culprit", "position": 40},
        "culprit": {"sha": f"{40:040x}"}, "prebuilts": [], "probes": [], "github": None,
        "good": {"ref": "v1", "sha": "a" * 40}, "bad": {"ref": "v2", "sha": "b" * 40},
    }
    d.update(kw)
    return d


NIGHTLIES = [{"position": p, "sha": f"{p:040x}", "kind": "nightly", "version": v}
             for p, v in [(0, "2.9.0.dev20250801"), (30, "2.9.0.dev20250802"),
                          (60, "2.9.0.dev20250803"), (100, "2.9.0.dev20250804")]]


def test_between_names_the_nightlies_on_each_side_of_the_culprit() -> None:
    pair = issue_report.between(_data(prebuilts=NIGHTLIES))
    assert pair is not None
    assert (pair[0]["version"], pair[1]["version"]) == ("2.9.0.dev20250802", "2.9.0.dev20250803")


@pytest.mark.parametrize("pos", [40, 60])
def test_a_culprit_that_is_a_nightly_commit_is_after_the_good_one(pos: int) -> None:
    pair = issue_report.between(_data(prebuilts=NIGHTLIES,
                                      result={"kind": "culprit", "position": pos}))
    assert pair is not None and pair[1]["position"] >= pos > pair[0]["position"]


def test_no_nightly_sentence_without_wheels_on_both_sides() -> None:
    assert issue_report.between(_data()) is None
    assert issue_report.between(_data(prebuilts=NIGHTLIES[2:])) is None


def test_portable_request_drops_this_machines_paths() -> None:
    req = Request(good="v1", bad="v2", oracle="/home/someone/oracles/my_check.py",
                  repo=Path("/home/someone/src/pytorch"), python="/opt/py/bin/python3",
                  nightly_index="/srv/mirror/nightly/cu128", jobs=2)
    line = reproduce_command(portable.portable_request(
        replace(req, installed_base="abc123", gpus="0,1"), "pytorch", good="a" * 40))
    assert "/home" not in line and "/opt" not in line and "/srv" not in line
    assert "--repo pytorch" in line and "--oracle ./my_check.py" in line
    assert "--nightly-index" not in line  # a local mirror: the default index elsewhere
    assert "--installed-base" not in line and "--gpus" not in line and "--jobs" not in line
    assert f"--good {'a' * 40}" in line


@pytest.mark.parametrize("url", ["http://127.0.0.1:41233/nightly/cpu", "http://localhost/simple",
                                 "https://[::1]:8080/whl/nightly/cu128"])
def test_an_index_that_lived_only_on_this_machine_is_not_repeated(url: str) -> None:
    """A loopback index (a test's, the demo's) is gone after the run and means nothing
    elsewhere: the reproduce line falls back to the default index (issue 35)."""
    req = Request(good="v1", bad="v2", oracle="torchlet_norm", repo=Path("/r"),
                  nightly_index=url, release_index=url)
    line = reproduce_command(portable.portable_request(req, "r"))
    assert "--nightly-index" not in line and "--release-index" not in line
    kept = replace(req, nightly_index="https://mirror.example.org/whl/nightly/cu128",
                   release_index=None)
    assert "--nightly-index https://mirror.example.org/whl/nightly/cu128" in \
        reproduce_command(portable.portable_request(kept, "r"))


def test_fences_outlast_backticks_in_the_text() -> None:
    text = "before\n```\n@someone ping\n````\nafter"
    block = fence(text)
    assert block[0] == block[-1] == "`````" and block[1] == text


def test_a_stopped_bisection_names_no_culprit_position() -> None:
    d = _data(result={"kind": "stop", "problem": "good_is_bad", "position": 0}, culprit=None,
              prebuilts=NIGHTLIES)
    assert issue_report.culprit_position(d) is None and issue_report.between(d) is None


def test_scrubber_uses_the_recorded_folders_and_generic_user_paths() -> None:
    scrub = portable.scrubber("/r", {"home": "/srv/alice", "data": "/srv/alice/.bd",
                                         "cache": "/scratch/bc"})
    out = scrub("/srv/alice/.bd/logs/x /scratch/bc/envs/y /home/bob/z "
                "/tmp/torchinductor_bob/ab/c.py /Users/carol/w")
    assert out == ("<bisector-data>/logs/x <bisector-cache>/envs/y ~/z "
                   "/tmp/torchinductor_<user>/ab/c.py ~/w")


def test_reproduce_clones_from_github_when_the_slug_is_known() -> None:
    req = Request(good="v2.8.0", bad="v2.9.1", oracle="name_mangling", repo=Path("/x/pt"))
    text = portable.reproduce(_data(github="pytorch/pytorch", repo="/x/pt"), req)
    assert text.splitlines()[0] == "git clone https://github.com/pytorch/pytorch.git pytorch"
    assert "--repo pytorch " in text.splitlines()[1]


def test_scrubber_rewrites_clone_home_and_site_packages() -> None:
    scrub = portable.scrubber("/home/someone/src/pytorch")
    text = ('File "/home/someone/src/pytorch/torch/_dynamo/x.py", line 3\n'
            'File "/usr/lib/python3.11/site-packages/torch/fx/y.py", line 9\n')
    out = scrub(text)
    assert "<repo>/torch/_dynamo/x.py" in out
    assert "…/site-packages/torch/fx/y.py" in out
    assert "/usr/lib" not in out


def test_versions_has_collect_env_lines() -> None:
    facts = {"torch": "2.11.0+cu130", "torch_git_version": "abc", "torch_cuda": "13.0",
             "gpu": "NVIDIA H100 80GB HBM3", "gpu_capability": "9.0", "python": "3.12.3",
             "platform": "Linux-6.8", "machine": "x86_64", "triton": "3.6.0", "cudnn": 91002}
    text = issue_report.versions(facts, {"executor": {"executor": "local"}})
    for line in ("PyTorch version: 2.11.0+cu130", "CUDA used to build PyTorch: 13.0",
                 "Is CUDA available: True", "[pip3] triton==3.6.0",
                 "GPU models and configuration: NVIDIA H100 80GB HBM3 (compute capability 9.0)"):
        assert line in text.splitlines()
    assert "bisector" not in text  # how bisector ran it is not the user's environment


def test_timeline_one_marker_per_probe_sized_by_cost_and_culprit_marked() -> None:
    probes = [_probe(1, 0, "good", 1.0), _probe(2, 100, "bad", 100.0),
              _probe(3, 50, "bad", 25.0), _probe(4, 40, "bad", 4.0), _probe(5, 39, "good", 0.0)]
    t = html_report.timeline(_data(probes=probes, prebuilts=NIGHTLIES))
    assert [m.seq for m in t["markers"]] == [1, 2, 3, 4, 5]
    assert [m.culprit for m in t["markers"]] == [False, False, False, True, False]
    radius = {m.seq: m.r for m in t["markers"]}
    assert radius[2] == html_report.R_MAX and radius[5] == html_report.R_MIN
    assert radius[1] < radius[4] < radius[3] < radius[2]
    xs = {m.seq: m.x for m in t["markers"]}
    assert xs[1] == html_report.LEFT and xs[2] == html_report.WIDTH - html_report.RIGHT
    assert len(t["ticks"]) == 101 and len(t["nightlies"]) == 4
    assert t["culprit_x"] == xs[4]


def test_report_escapes_what_git_and_oracles_wrote() -> None:
    evil = '<script>alert("x")</script>'
    probes = [_probe(1, 40, "bad", subject=evil, output_tail=evil)]
    d = _data(probes=probes, culprit={"sha": f"{40:040x}", "subject": evil,
                                      "pr": 1, "pr_url": "javascript:alert(1)"},
              message=None, suspects=[], walk="first-parent", oracle_runs=1,
              compare_url=None, oracle={"name": "o", "sha256": "0" * 64, "source": evil},
              environment={}, notes=[], polarity="failure", find_fix=False,
              on_timeout="skip", jobs=1, gpus=[], env_fingerprint="f" * 64)
    page = html_report.render_report(d, issue=evil)
    assert evil not in page and "&lt;script&gt;alert(" in page
    assert 'href="javascript:' not in page
    assert page.count('<circle class="probe') == 1


def test_a_flaky_confirmation_shows_the_probability_before_and_after_its_runs() -> None:
    from bisector.app.report.result_text import confirmation_summary

    runs = [{"run": i, "verdict": v, "reason": "exit"} for i, v in enumerate(["bad", "good"])]
    c = {"status": "confirmed", "culprit": runs, "parent": runs[1:], "judged_by": "posterior",
         "culprit_verdict": "skip", "parent_verdict": "good", "probability_before": 0.99213,
         "probability_after": 0.99871, "confidence": 0.99, "revert": {"applied": False}}
    text = confirmation_summary(c, "good", "bad")
    assert text.startswith("Confirmation: confirmed (culprit again: bad, good; parent again: "
                           "good; ")
    assert ("probability 0.9921 after the search, 0.9987 with the fresh runs (confirmed at 0.99 "
            "or more)") in text
    without = {k: v for k, v in c.items() if not k.startswith("probability")}
    assert "probability" not in confirmation_summary(without, "good", "bad")
    # The search's own runs that stood in for fresh ones are shown as what they were.
    stood = {**c, "culprit": [], "from_search": {"culprit": [3, 3], "parent": [0, 2]}}
    text = confirmation_summary(stood, "good", "bad")
    assert text.startswith("Confirmation: confirmed (culprit: failed 3 of 3 in the search, "
                           "fresh: none; parent: failed 0 of 2 in the search, fresh: good; ")
    none_owed = confirmation_summary({**stood, "parent": []}, "good", "bad")
    assert "fresh: none; the culprit's probability 0.9987 (confirmed at 0.99" in none_owed


def test_a_traceback_is_shown_whole() -> None:
    """Its first line says what it is: a tail of N lines must not cut it off (issue 35)."""
    frames = [f'  File "x.py", line {i}, in f{i}\n    f{i + 1}()' for i in range(20)]
    chained = "\n".join(["noise"] * 50 + ["Traceback (most recent call last):", *frames,
                                          "KeyError: 'a'", "",
                                          "During handling of the above exception, another "
                                          "exception occurred:", "",
                                          "Traceback (most recent call last):", *frames,
                                          "ValueError: b"])
    out = report.tail(chained, 30).splitlines()
    assert out[0] == "Traceback (most recent call last):" and out[-1] == "ValueError: b"
    assert "KeyError: 'a'" in out and "noise" not in out  # the chain, from its first traceback
    plain = "\n".join(f"line {i}" for i in range(100))
    assert report.tail(plain, 30).splitlines() == [f"line {i}" for i in range(70, 100)]
    huge = "\n".join(["Traceback (most recent call last):", *["  frame"] * 500, "E: x"])
    assert len(report.tail(huge, 30).splitlines()) == 200  # whole up to TRACEBACK_LINES
