"""Reports name the project by its profile: PyTorch's words for PyTorch only."""

from __future__ import annotations

import pytest

from bisector.app.report import issue as issue_report
from bisector.project.profiles import report_names as project_words

pytestmark = pytest.mark.unit

ENV = {"executor": {"executor": "local", "python": "cp312"}}


def test_project_words_by_profile() -> None:
    assert project_words("pytorch", "/src/pytorch") == {
        "profile": "pytorch", "name": "PyTorch", "package": "torch"}
    assert project_words("torchlet", "/x/y") == {
        "profile": "torchlet", "name": "torchlet", "package": "torchlet"}
    assert project_words("generic", "/src/mylib/") == {
        "profile": "generic", "name": "mylib", "package": "package"}
    assert project_words("gone", "org/proj")["name"] == "proj"


def test_a_package_project_never_reads_pytorch_na() -> None:
    facts = {"package": "torchlet", "package_version": "0.3", "git_version": "abc",
             "python": "3.12.3"}
    text = issue_report.versions(facts, ENV, project_words("torchlet", "/r"))
    assert "torchlet version: 0.3" in text and "torchlet git version: abc" in text
    assert "PyTorch" not in text


def test_a_generic_project_says_its_name_and_torch_only_when_installed() -> None:
    text = issue_report.versions({"python": "3.12.3"}, ENV, project_words("generic", "/s/mylib"))
    assert text.splitlines()[0] == "mylib version: N/A" and "PyTorch" not in text
    with_torch = issue_report.versions({"torch": "2.9.1", "torch_cuda": "12.8"}, ENV,
                                       project_words("generic", "/s/mylib"))
    assert "PyTorch version: 2.9.1" in with_torch and "CUDA used to build PyTorch: 12.8" in \
        with_torch


def test_pytorch_keeps_collect_env_lines() -> None:
    text = issue_report.versions({"torch": "2.9.1", "torch_git_version": "f" * 40}, ENV,
                                 project_words("pytorch", "/src/pytorch"))
    assert text.splitlines()[:3] == ["PyTorch version: 2.9.1",
                                     f"PyTorch git version: {'f' * 40}",
                                     "CUDA used to build PyTorch: N/A"]
