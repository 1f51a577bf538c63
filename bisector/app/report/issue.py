"""The report a person pastes into a GitHub issue (``bisect show ID --format issue``).

It is built from the same data as ``bisect show --json`` and written for someone on another
machine: the culprit with its pull request and author, the two nightlies the regression falls
between (a user pins the older one), a compare link for the range, the oracle's source and its own
words at the culprit and at its parent, the environment in the shape of
``python -m torch.utils.collect_env``, and a reproduce line without local paths. Paths of this
machine (the clone, bisector's data and cache folders, the home folder, site-packages prefixes)
are rewritten wherever they appear, so nothing of the box leaks into a public issue; in the
title and the oracle's summary a path inside the clone reads relative to it (``sh ./orc.sh``).
Every command is pasteable (app/report/paste.py): each word rewritten on its own, no
``<placeholder>`` a shell would read as a redirection, and the variables the oracle ran with
(``--env``) in each way to reproduce.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from bisector.app.report import by_hand, compile_debug, compiler_pass, hunted, merge_text, paste
from bisector.app.report.portable import (
    clone_name,
    portable,
    portable_request,
    probed_variant,
    reproduce,
    scrubber,
)
from bisector.app.report.result_text import (
    confirmation_summary,
    inherited_line,
    noisy_summary,
    perf_table,
    probe_counts,
    range_commits,
    suspect_probabilities,
    suspects_heading,
)
from bisector.app.report.show import culprit_facts, tail
from bisector.base import oracle_env
from bisector.base.escape import code, fence, md
from bisector.oracle.command import argv_of
from bisector.oracle.script import foreign_interpreter
from bisector.project.profiles import PROFILES, nightly_url
from bisector.run.config import Request


def culprit_position(d: dict[str, Any]) -> int | None:
    """The culprit's position, only when the answer is a culprit (a stopped bisection's
    result also has a position: the endpoint that stopped it)."""
    result = d["result"] or {}
    if result.get("kind") != "culprit" or not d["culprit"]:
        return None
    pos = result.get("position")
    return int(pos) if pos is not None else None


def between(d: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The last placed wheel before the culprit and the first one at or after it."""
    pos = culprit_position(d)
    placed = [pb for pb in d["prebuilts"] if pb["position"] is not None]
    if pos is None or not placed:
        return None
    before = [pb for pb in placed if pb["position"] < pos]
    after = [pb for pb in placed if pb["position"] >= pos]
    if not before or not after:
        return None
    return (max(before, key=lambda pb: pb["position"]),
            min(after, key=lambda pb: pb["position"]))


def versions(facts: dict[str, Any], environment: dict[str, Any],
             project: dict[str, str] | None = None) -> str:
    """The environment in the layout of ``torch.utils.collect_env`` (from recorded facts).

    The project's own lines say its name (``project``, from
    :func:`bisector.project.profiles.report_names`): a project other than PyTorch never reads
    "PyTorch version: N/A"; torch's lines are there only where torch was installed beside it.
    """
    ex = environment.get("executor", {})
    na = "N/A"
    cuda = facts.get("torch_cuda")
    # No project (a caller with facts alone): torch's lines when the facts are torch's.
    torch = (project["package"] == "torch" if project else
             bool(facts.get("torch")) or facts.get("package") in (None, "torch"))
    name = "PyTorch" if torch else (project or {}).get("name") or facts.get("package") \
        or "Package"
    version = facts.get("torch", na) if torch else \
        facts.get("package_version") or facts.get("distribution_version") or na
    git_version = (facts.get("torch_git_version") if torch else facts.get("git_version")) or na
    lines = [f"{name} version: {version}", f"{name} git version: {git_version}"]
    if not torch and facts.get("torch"):
        lines.append(f"PyTorch version: {facts['torch']}")
    if torch or facts.get("torch"):
        lines.append(f"CUDA used to build PyTorch: {cuda or na}")
    lines += [
        "",
        f"OS: {facts.get('platform', ex.get('system', na))} "
        f"({facts.get('machine', ex.get('machine', na))})",
        f"Python version: {facts.get('python', ex.get('python', na))}",
    ]
    if torch or facts.get("torch") or facts.get("gpu"):  # a pure-Python project has none
        lines += [
            f"Is CUDA available: {'True' if facts.get('gpu') else 'False'}",
            f"GPU models and configuration: {facts.get('gpu', na)}"
            + (f" (compute capability {facts['gpu_capability']})"
               if facts.get("gpu_capability") else ""),
            f"cuDNN version: {facts.get('cudnn', na)}",
        ]
    # How bisector ran it (the executor, its image) is no fact of the user's environment: it
    # is in the HTML report and the JSON, not in the text pasted into an issue.
    lines += ["", "Versions of relevant libraries:"]
    if facts.get("torch"):
        lines.append(f"[pip3] torch=={facts['torch']}")
    if facts.get("triton"):
        lines.append(f"[pip3] triton=={facts['triton']}")
    if facts.get("package") and facts["package"] != "torch":
        lines.append(f"[pip3] {facts['package']}=={facts.get('package_version', '')}")
    elif facts.get("distribution"):  # a pure-Python project's, read from its dist-info
        lines.append(f"[pip3] {facts['distribution']}=={facts.get('distribution_version')}")
    for k, v in sorted((facts.get("env") or {}).items()):
        lines.append(f"{k}={v}")
    return "\n".join(lines)


def _output(p: dict[str, Any], label: str, new: str, old: str,
            scrub: Callable[[str], str], package: str = "torch") -> list[str]:
    """One probe's output, named with how its package was obtained (an overlay of the
    commit's Python files on a nightly, a prebuilt wheel, a build): one nightly version can
    be both good and bad once overlays are in play, and the reader must see which was which."""
    verdict = {"good": old, "bad": new}.get(p["verdict"], p["verdict"])
    text = scrub(tail(p.get("output_tail") or "", 30)) or "(no output)"
    obtained = (p.get("facts") or {}).get("obtained")
    how = f"; {md(package)}: {md(scrub(str(obtained)))}" if obtained else ""
    return [f"Oracle output at {label} `{p['sha'][:12]}` ({verdict}, {md(p['reason'])}{how}):",
            "", *fence(text), ""]


def _moved(change: float, direction: str) -> str:
    """How far the metric moved, in its own terms: a time ``N % slower`` (the change is the
    ratio of times less one), a score or speed-up ``N % lower`` (the change is then how much
    worse, reference over measured less one: 0.99 to 0.33 is +200 % worse, 67 % lower)."""
    if direction == "lower-is-better":
        return f"{abs(100 * change):.0f} % {'faster' if change < 0 else 'slower'}"
    value = 1.0 / (1.0 + change) - 1.0 if change > -1.0 else 0.0
    return f"{abs(100 * value):.0f} % {'higher' if value > 0 else 'lower'}"


def _no_culprit(d: dict[str, Any]) -> str:
    """Why there is no culprit: a running bisection has not named one yet (saying "no culprit
    was named" of it reads as if it had ended empty-handed)."""
    n = len(d["probes"])
    if d["state"] == "running":
        return f"still running: {n} probes so far, no culprit yet"
    if d["state"] in ("interrupted", "cancelled"):
        return f"stopped after {n} probes, before a culprit was named: `bisect resume {d['id']}`"
    return "no culprit was named"


def _env(req: Request) -> dict[str, str]:
    """The oracle environment the user chose (``--env``; not what the run inherited nor
    what a box's image says of itself), each way to reproduce sets it."""
    return oracle_env.parse(req.typed_env)


def _by_hand(d: dict[str, Any], req: Request, saved: str, probe: dict[str, Any] | None,
             scrub: Callable[[str], str]) -> list[str]:
    """"Reproduce without bisector" (app/report/by_hand.py) for the culprit's ``probe``: the nightly
    index the probes used (the profile's, for the variant probed, unless it lived only on
    this machine); the oracle with its environment, a path inside the clone relative to the
    checkout."""
    prof = PROFILES.get(str((d.get("project") or {}).get("profile")))
    variant = probed_variant(d) or req.variant or (prof.default_variant if prof else None)
    index = portable(d, req).nightly_index or (nightly_url(prof, variant) if prof else None)
    if index and (urlsplit(index).username or urlsplit(index).query):
        index = None  # credentials: never in a pasted issue (the default index instead)
    clone = (f"https://github.com/{d['github']}.git" if d.get("github")
             else clone_name(d))
    lines = by_hand.steps(d, probe, compiler_pass.oracle_file(d, saved), clone, index, scrub,
                          paste.env(_env(req), scrub))
    if lines is None:
        return []
    return ["Reproduce without bisector (the culprit's package as its probe got it, then the "
            "oracle):", "", *fence(scrub("\n".join(lines)), "sh"), ""]


# Above ruff's limits on purpose: the issue's sections in the order a reader meets them.
def issue_markdown(d: dict[str, Any], req: Request) -> str:  # noqa: PLR0915
    recorded = (d["environment"] or {}).get("paths")
    scrub = scrubber(d["repo"], recorded)
    old, new = d["terms"]["old"], d["terms"]["new"]
    # The title and the summary name the oracle with a path inside the clone relative to it.
    oracle = {**d["oracle"], "name": scrubber(d["repo"], recorded, ".")(d["oracle"]["name"])}
    fails = "fails" if d["polarity"] == "failure" else "passes"
    # Looking for a fix, the found commit is where the oracle's answer turned back.
    since = "is fixed by" if d["find_fix"] else f"{fails} since"
    pf = (d.get("result") or {}).get("perf")
    c = d["culprit"]
    if pf and c:  # a measurement: say how much slower, never "fails"
        row = next((r for r in pf["commits"] if r["sha"] == c["sha"]), None)
        if row and row.get("change") is not None:
            since = f"{_moved(float(row['change']), pf['direction'])} since"
    unsure = d["state"] in ("not reproducible", "inconclusive")
    lines: list[str] = []
    if c:
        lines += [f"### {code(oracle['name'])} {since} {c['sha'][:12]}"
                  + (f"? ({d['state']})" if unsure else "")
                  + (f": {md(c['subject'])}" if c.get("subject") else ""), ""]
        who = f" by {md(c['author'])}" if c.get("author") else ""
        pr = (f" in [#{c['pr']}]({c['pr_url']})" if c.get("pr_url")
              else f" in #{c['pr']}" if c.get("pr") else "")
        said = (f"The search named `{c['sha']}`{pr}{who} as the first {new} commit, but it is "
                f"**{d['state']}**: it did not hold up when it ran again"
                if unsure else f"The first {new} commit is `{c['sha']}`{pr}{who}")
        lines.append(said + (f" ({c['date'][:10]})." if c.get("date") else "."))
        if beside := merge_text.issue(d):  # a merge: the commit inside it, or why none
            lines += ["", beside[0]]
    elif d["suspects"]:
        lines += [f"### {code(oracle['name'])} {fails}: one of {len(d['suspects'])} commits",
                  "", suspects_heading(d)]
        lines += [f"- `{x['sha'][:12]}` {md(x.get('subject', ''))}{q}"
                  for x, q in zip(d["suspects"], suspect_probabilities(d), strict=False)]
    else:
        lines += [f"### bisector #{d['id']}: {d['state']}", "",
                  *(md(m) for m in scrub(d["message"] or _no_culprit(d)).splitlines())]
    lines.append("")
    if (d["result"] or {}).get("noisy"):
        lines += [noisy_summary(d["result"]["noisy"]) + ".", ""]
    if (d["result"] or {}).get("confirmation"):
        lines += [confirmation_summary(d["result"]["confirmation"], old, new) + ".", ""]
    if (d["result"] or {}).get("perf"):
        lines += [*perf_table(d["result"]["perf"], old, new), ""]
    pair = between(d)
    if pair:
        lo, hi = pair
        changed = "was fixed" if d["find_fix"] else "regressed"
        lines += [f"It {changed} between {lo['kind']} {lo['version']} ({old}) and "
                  f"{hi['kind']} {hi['version']} ({new}).", ""]
    rng = f"{d['good']['ref']}...{d['bad']['ref']}"
    rng = f"[{md(rng)}]({d['compare_url']})" if d["compare_url"] else code(rng)
    lines += [f"Bisected {rng} ({range_commits(d)} commits, {d['walk']}) with "
              f"{len(d['probes'])} probes ({probe_counts(d)}).", ""]
    # Which prior the search used (--prior) is how bisector searched, not the bug: the HTML
    # report and the JSON say it, the pasted issue does not.
    if d.get("failed_differently"):  # skipped: another failure than the one hunted
        lines += [*hunted.section(d, scrub)[1:], ""]
    by_pos = {p["position"]: p for p in d["probes"] if p.get("position") is not None}
    package = (d.get("project") or {}).get("package", "torch")
    pos = culprit_position(d)
    if pos is not None and pos in by_pos:
        lines += _output(by_pos[pos], "the culprit", new, old, scrub, package)
    if pos is not None and pos - 1 in by_pos:
        # Candidates are first-parent commits unless --ancestry-path ordered the range.
        label = ("its parent" if d["walk"] == "first-parent"
                 else "the commit before it in the range")
        lines += _output(by_pos[pos - 1], label, new, old, scrub, package)
    inner = ((d["result"] or {}).get("into_merge") or {}).get("position")
    if d.get("inside") and inner in by_pos:  # what the commit inside the merge printed
        lines += _output(by_pos[inner], "the commit inside the merge", new, old, scrub, package)
    saved = portable_request(req, "").oracle
    passed = compiler_pass.markdown(d, scrub, saved, _env(req))
    lines += [*passed[1:], ""] if passed else []
    typed_beside = paste.beside(clone_name(d))  # the check lines are typed beside the clone
    debug = compile_debug.markdown(compile_debug.hints(
        d, portable(d, req), lambda w: paste.word(w, scrub, typed_beside)), scrub)
    lines += [*debug[1:], ""] if debug else []
    save_as = (f" (save it as <code>{html.escape(saved[2:])}</code>)" if saved.startswith("./")
               else "")
    # A command oracle's source is its stored document; a #!/bin/bash oracle is not Python.
    command = argv_of(oracle["source"]) is not None
    lang = "python" if foreign_interpreter(oracle["source"].encode()) is None else ""
    lines += [f"<details><summary>{'Command oracle' if command else 'Oracle'} "
              f"<code>{html.escape(oracle['name'])}</code> "
              f"(sha256 {oracle['sha256'][:12]}){save_as}</summary>", "",
              *fence(scrub(oracle["source"].rstrip()), "" if command else lang), "",
              "</details>", "",
              *_by_hand(d, req, saved, by_pos.get(pos) if pos is not None else None, scrub),
              "Reproduce with bisector:", "", *fence(scrub(reproduce(d, req, scrub))), "",
              *[f"{x}\n" for x in (inherited_line(d, scrub),) if x],
              "### Versions", "", *fence(compiler_pass.environment_block(d, scrub) or scrub(
                  versions(culprit_facts(d), d["environment"], d.get("project"))))]
    return "\n".join(lines) + "\n"
