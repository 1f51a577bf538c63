"""The reports and ``bisect serve`` over a real store made by real bisections: every page and
endpoint over HTTP, the JSON endpoints against the CLI's ``--json``, escaping of a hostile commit
subject, and a real headless Chromium that runs the page's script and takes screenshots."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from bisector.app.demo.torchlet import SyntheticHistory, generate
from bisector.app.report import views
from bisector.store.db import open_store
from bisector.web import server as web
from tests import support
from tests.support import BISECT, ROOT, serving

EVIL = '<script>document.title="owned"</script> Simplify the norm'


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory,
          shared_cache: Path) -> tuple[SyntheticHistory, Path, dict[str, str]]:
    """Two bisections in one SQLite store: one done (the culprit's subject is hostile HTML),
    one failed (its good endpoint is already bad)."""
    root = tmp_path_factory.mktemp("web")
    hist = generate(root / "torchlet", commits=40, culprit=25, broken=(19, 20), release_at=None,
                    side_branch_at=None, culprit_subject=EVIL)
    env = {**os.environ, "BISECTOR_HOME": str(root / "home"),
           "BISECTOR_CACHE_DIR": str(shared_cache)}
    env.pop("BISECTOR_DB", None)
    db = root / "web.db"
    main = hist.main
    for good, bad in ((main[0], main[-1]), (main[30], main[-1])):
        subprocess.run([*BISECT, "--db", str(db), "start", "--repo", str(hist.path), "--good",
                        good, "--bad", bad, "--oracle", "torchlet_norm", "--no-prebuilt",
                        "--json"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    return hist, db, env


def cli(served: tuple[SyntheticHistory, Path, dict[str, str]], *args: str) -> str:
    """``bisect --db <the served's store> ARGS`` in-process, with the served's folders."""
    _, db, env = served
    return support.cli(db, *args, env={"BISECTOR_HOME": env["BISECTOR_HOME"],
                                       "BISECTOR_CACHE_DIR": env["BISECTOR_CACHE_DIR"],
                                       "BISECTOR_DB": None})


@pytest.fixture(scope="module")
def client(served: tuple[SyntheticHistory, Path, dict[str, str]]) -> Iterator[TestClient]:
    _, db, env = served
    mp = pytest.MonkeyPatch()
    for name in ("BISECTOR_HOME", "BISECTOR_CACHE_DIR"):  # the serving machine's folders
        mp.setenv(name, env[name])
    try:
        store = open_store(str(db), create=False)
        with TestClient(web.create_app(store)) as c:
            c.app_state["store"] = store  # the tests that write use the app's own engine
            yield c
    finally:
        mp.undo()


def test_both_bisections_ended_as_planted(served: tuple[SyntheticHistory, Path, dict[str, str]]
                                          ) -> None:
    rows = json.loads(cli(served, "list", "--json"))
    assert {r["state"] for r in rows} == {"done", "failed"}
    done = next(r for r in rows if r["state"] == "done")
    assert done["culprit"] == served[0].culprit and done["culprit_pr"]


def test_list_page_and_its_filters(client: TestClient,
                                   served: tuple[SyntheticHistory, Path, dict[str, str]]) -> None:
    culprit = served[0].culprit
    rows = client.get("/api/bisections").json()
    pr = next(r["culprit_pr"] for r in rows if r["culprit"])
    page = client.get("/")
    assert page.status_code == 200 and page.text.count('<td><a href="/bisections/') == 2

    def ids(**params: str) -> set[int]:
        return {r["id"] for r in client.get("/api/bisections", params=params).json()}

    assert ids(state="done") == {r["id"] for r in rows if r["state"] == "done"}
    assert ids(state="failed") == {r["id"] for r in rows if r["state"] == "failed"}
    assert ids(culprit=culprit[:9]) == ids(culprit=f"#{pr}") == ids(state="done")
    assert ids(culprit="deadbeef") == set()
    assert ids(oracle="torchlet_norm") == {r["id"] for r in rows}
    assert ids(oracle="other") == set()
    assert ids(repo="torchlet") == {r["id"] for r in rows} and ids(repo="nope") == set()
    filtered = client.get("/", params={"state": "failed"}).text
    assert filtered.count('<td><a href="/bisections/') == 1


def test_bisection_page_escapes_git_strings_and_marks_every_probe(
        client: TestClient, served: tuple[SyntheticHistory, Path, dict[str, str]]) -> None:
    done = next(r for r in client.get("/api/bisections").json() if r["state"] == "done")
    d = client.get(f"/api/bisections/{done['id']}").json()
    page = client.get(f"/bisections/{done['id']}").text
    assert EVIL not in page and "&lt;script&gt;document.title=" in page
    assert page.count('<circle class="probe') == len(d["probes"])
    assert page.count(" culprit\" data-seq") == 1
    assert page.count('id="probe-') == len(d["probes"])
    r = client.get(f"/bisections/{done['id']}")
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["x-content-type-options"] == "nosniff"


def test_json_endpoints_mirror_the_cli(client: TestClient,
                                       served: tuple[SyntheticHistory, Path, dict[str, str]]
                                       ) -> None:
    assert client.get("/api/bisections").json() == json.loads(cli(served, "list", "--json"))
    for row in client.get("/api/bisections").json():
        i = str(row["id"])
        assert client.get(f"/api/bisections/{i}").json() == json.loads(
            cli(served, "show", i, "--json"))
        assert client.get(f"/api/bisections/{i}/log").json() == json.loads(
            cli(served, "log", i, "--json"))


def test_issue_report_has_no_local_paths_and_matches_the_cli(
        client: TestClient, served: tuple[SyntheticHistory, Path, dict[str, str]]) -> None:
    hist, db, env = served
    done = next(r for r in client.get("/api/bisections").json() if r["state"] == "done")
    text = client.get(f"/bisections/{done['id']}/report.md").text
    assert text == cli(served, "show", str(done["id"]), "--format", "issue")
    for local in (str(hist.path), env["BISECTOR_HOME"], str(db), str(Path.home())):
        assert local not in text
    assert f"The first bad commit is `{hist.culprit}`" in text
    assert "Oracle output at the culprit" in text and "Oracle output at its parent" in text
    assert "<details><summary>Oracle <code>torchlet_norm</code>" in text
    assert "bisect start --repo torchlet --good" in text
    assert "### Versions" in text and "Python version:" in text
    # Written at the end of the bisection too, without anyone asking.
    written, _ = views.report_paths(open_store(str(db), create=False), done["id"])
    assert written.read_text() == text


def test_logs_are_served_as_plain_text_and_only_recorded_ones(
        client: TestClient) -> None:
    done = next(r for r in client.get("/api/bisections").json() if r["state"] == "done")
    d = client.get(f"/api/bisections/{done['id']}").json()
    bad = next(p for p in d["probes"] if p["verdict"] == "bad")
    r = client.get(f"/bisections/{done['id']}/probes/{bad['seq']}/stdout")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    assert r.text == Path(bad["stdout"]).read_text()
    skipped = next(p for p in d["probes"] if p.get("build_log"))
    build = client.get(f"/bisections/{done['id']}/probes/{skipped['seq']}/build")
    assert build.status_code == 200 and "#error" in build.text
    assert client.get(f"/bisections/{done['id']}/probes/{bad['seq']}/passwd").status_code == 404
    assert client.get(f"/bisections/{done['id']}/probes/999/stdout").status_code == 404
    missing = client.get("/bisections/999")
    assert missing.status_code == 404 and "no bisection with id 999" in missing.text


def test_no_write_endpoints(client: TestClient) -> None:
    for path in ("/", "/api/bisections", "/bisections/1", "/api/bisections/1"):
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            assert client.request(method, path).status_code == 405


def test_html_report_is_one_self_contained_file(
        served: tuple[SyntheticHistory, Path, dict[str, str]], tmp_path: Path) -> None:
    rows = json.loads(cli(served, "list", "--json"))
    done = next(r for r in rows if r["state"] == "done")
    html = cli(served, "show", str(done["id"]), "--format", "html")
    assert html.startswith("<!doctype html>")
    for external in ("<link", "src=", "@import", "url("):
        assert external not in html
    d = json.loads(cli(served, "show", str(done["id"]), "--json"))
    assert html.count('<circle class="probe') == len(d["probes"])
    assert EVIL not in html


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here: apt-get install chromium")
def test_real_browser_opens_the_list_and_a_bisection(
        served: tuple[SyntheticHistory, Path, dict[str, str]], tmp_path: Path) -> None:
    assert CHROMIUM is not None
    _, db, env = served
    with serving("--db", str(db), env=env) as base:
        rows = httpx.get(base + "/api/bisections").json()
        done = next(r for r in rows if r["state"] == "done")
        probes = httpx.get(f"{base}/api/bisections/{done['id']}").json()["probes"]

        def browse(path: str, shot: str) -> str:
            flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                     "--hide-scrollbars", "--window-size=1280,1500",
                     f"--user-data-dir={tmp_path / 'profile'}"]
            subprocess.run([*flags, f"--screenshot={tmp_path / shot}", base + path],
                           capture_output=True, timeout=120, check=True)
            dom = subprocess.run([*flags, "--dump-dom", base + path], capture_output=True,
                                 text=True, timeout=120, check=True)
            return dom.stdout

        listing = browse("/", "list.png")
        assert listing.count('<td><a href="/bisections/') == len(rows)
        page = browse(f"/bisections/{done['id']}", "bisection.png")
        # Attributes the page's own script sets: proof that the browser ran it over the SVG.
        assert 'data-ready="1"' in page
        assert f'data-markers="{len(probes)}"' in page
        assert 'data-culprit-markers="1"' in page
        assert "<title>owned</title>" not in page  # the hostile subject stayed text
        for shot in ("list.png", "bisection.png"):
            assert (tmp_path / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert (tmp_path / shot).stat().st_size > 10_000


def test_show_prints_the_output_of_failing_and_skipped_probes(
        served: tuple[SyntheticHistory, Path, dict[str, str]]) -> None:
    rows = json.loads(cli(served, "list", "--json"))
    done = next(r for r in rows if r["state"] == "done")
    text = cli(served, "show", str(done["id"]))
    d = json.loads(cli(served, "show", str(done["id"]), "--json"))
    bad = [p for p in d["probes"] if p["verdict"] == "bad"]
    assert bad and all(f"Output of probe {p['seq']} (`{p['sha'][:12]}`" in text for p in bad)
    assert "norm([3, 4]) = 25.0" in text  # the oracle's own words at a bad commit
    good = [p for p in d["probes"] if p["verdict"] == "good"]
    assert not any(f"Output of probe {p['seq']} " in text for p in good)


def test_an_error_under_format_json_is_json_too(
        served: tuple[SyntheticHistory, Path, dict[str, str]]) -> None:
    _, db, env = served
    r = support.invoke("--db", str(db), "show", "999", "--format", "json",
                       env={"BISECTOR_HOME": env["BISECTOR_HOME"], "BISECTOR_DB": None})
    assert r.exit_code == 6
    assert "no bisection with id 999" in json.loads(r.stdout)["error"]["message"]


def test_a_log_path_outside_bisectors_folders_is_never_read(
        client: TestClient, served: tuple[SyntheticHistory, Path, dict[str, str]],
        tmp_path: Path) -> None:
    from sqlalchemy import update

    from bisector.store import models as m

    secret = tmp_path / "secret.txt"
    secret.write_text("do not serve me")
    done = next(r for r in client.get("/api/bisections").json() if r["state"] == "done")
    bad = next(p for p in client.get(f"/api/bisections/{done['id']}").json()["probes"]
               if p["verdict"] == "bad")
    store = client.app_state["store"]

    def point(old: str, new: str) -> None:  # someone with write access to the store
        with store.session() as s:
            s.execute(update(m.RunRow).where(m.RunRow.stdout_path == old)
                      .values(stdout_path=new))

    point(bad["stdout"], str(secret))
    try:
        r = client.get(f"/bisections/{done['id']}/probes/{bad['seq']}/stdout")
        assert "do not serve me" not in r.text
    finally:
        point(str(secret), bad["stdout"])


def test_a_foreign_host_header_is_refused_on_loopback(client: TestClient) -> None:
    guarded = web.create_app(client.app_state["store"], web.LOOPBACK)
    with TestClient(guarded, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/api/bisections").status_code == 200
        rebound = c.get("/api/bisections", headers={"host": "attacker.example:8000"})
        assert rebound.status_code == 400
