"""How ``bisect plan`` prints a plan: the projection of one range (``app/plan.PlanReport``) as
lines for a terminal, or JSON."""

from __future__ import annotations

import json
from typing import Any

import click

from bisector.cli.console import err, escape, out


def print_plan(rep: Any, json_out: bool) -> None:
    """One plan: its notes on stderr, its lines (or its JSON) on stdout."""
    # lazy: `bisect --help` and completion import none of this
    from bisector.app.plan import describe_source, human

    if json_out:
        click.echo(json.dumps(rep.as_dict(), indent=2, default=str))
        return
    for note in rep.notes:
        err.print(f"[yellow]note:[/] {escape(note)}")
    k = rep.kinds
    # As show counts the range (git rev-list --count GOOD..BAD): the good endpoint is no
    # candidate for the first bad commit, though the search runs it. 30 here read against
    # show's 29 for the same range.
    out.print(f"[bold]{rep.range_commits}[/] candidate commits, and the good endpoint")
    src = rep.prebuilt_sources
    out.print(f"  prebuilt wheels inside the range: {len(rep.prebuilt)} "
              f"({src.get('listed', 0)} from the index listing, "
              f"{src.get('direct URL', 0)} by direct URL)")
    for pb in rep.prebuilt[:20]:
        where = "-" if pb["position"] is None else pb["position"]
        how = " (direct URL)" if pb.get("source") == "direct URL" else ""
        out.print(f"    {where:>6}  {pb['commit'][:12]}  {pb['kind']:<9} "
                  f"{escape(pb['filename'])}{how}")
    if len(rep.prebuilt) > 20:
        out.print(f"    ... {len(rep.prebuilt) - 20} more")
    out.print(f"  prebuilt wheels gone from the index: {len(rep.missing)}")
    for name in rep.missing[:10]:
        out.print(f"    {escape(name)}")
    out.print(f"  overlay-eligible commits: {k.get('overlay', 0)}")
    out.print(f"  already built, or nothing to build (cached): {k.get('cached', 0)}; known "
              f"not to build: {k.get('broken', 0)}")
    out.print(f"  commits that would need a source build: {k.get('build', 0)}")
    out.print(f"  stored verdicts in the range: {rep.stored_verdicts} (reused, never run again)")
    if rep.stored_verdicts and rep.probes_max == 0:
        out.print("  the stored verdicts already answer this range: a run only reports them")
    out.print(f"  oracle runs: {rep.probes_mean:.1f} on average, at most {rep.probes_max}")
    out.print(f"  expected source builds: {rep.builds_mean:.1f} on average, at most "
              f"{rep.builds_max}")
    out.print(f"  projected wall time: {human(rep.seconds_mean)} on average, at most "
              f"{human(rep.seconds_max)}, each probe's torch obtained when it is chosen")
    if rep.seconds_prefetch_mean is not None:
        out.print(f"  with the next probes made while the oracle runs (the default; "
                  f"--prefetch 0 turns it off): {human(rep.seconds_prefetch_mean)} on average")
    out.print("  per-step costs (change with --cost STEP=SECONDS):")
    for step, seconds in rep.costs.items():
        shown = f"{seconds:.1f} s" if seconds < 90 else human(seconds)
        out.print(f"    {step:<9}{shown:>9}  {describe_source(rep.cost_sources.get(step, {}))}")
