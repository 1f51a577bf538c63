"""What a build's log and statistics say, in one line each: the ccache hits of one build (read
from its own stats log, not ccache's global counters, which concurrent builds share) and the line
of a failed build's log that names what broke. The progress, the reports and ``bisect check``
all show these."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bisector.infra.proc import tail


def describe_stats(stats: dict[str, Any]) -> str:
    """``ccache 12/15 hits (80%)``: the line a build's log and the progress show."""
    cc = stats.get("ccache")
    if not cc:
        return ""
    calls = cc["hits"] + cc["misses"]
    if not calls:
        return "ccache: no compile finished"
    return f"ccache {cc['hits']}/{calls} hits ({100 * cc['hits'] / calls:.0f}%)"


def parse_ccache_log(text: str) -> dict[str, int]:
    """Hits and misses of one build from ccache's stats log (one ``# file`` block per call).

    A per-build log instead of ``ccache -s`` before and after: the cache volume is shared by
    every build of the repository, so global counters would mix concurrent builds.
    """
    hits = misses = 0
    for line in text.splitlines():
        word = line.strip()
        if word in ("direct_cache_hit", "preprocessed_cache_hit"):
            hits += 1
        elif word == "cache_miss":
            misses += 1
    return {"hits": hits, "misses": misses}


GENERIC_ERRORS = ("error: failed to build", "error: command", "error: subprocess-exited")


def failure_summary(log_path: Path) -> str:
    """The line of a build log that says what broke.

    A compiler's ``file:line: error:`` line first (a command line echoing
    ``-Werror=...`` is not one), then any other specific ``error`` line, else the last line.
    """
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ": error:" in ln or ": fatal error:" in ln:
            return ln[:200]
    for ln in lines:
        low = ln.lower()
        if "error" in low and not low.startswith(GENERIC_ERRORS) and "-werror" not in low:
            return ln[:200]
    return lines[-1][:200] if lines else "no output"


def failed_tail(log_path: Path, lines: int = 15) -> str:
    """A failed build's tail as ``show`` prints it: its last ``lines`` lines, led by the line
    that says what broke (:func:`failure_summary`) when they do not hold it (a CMake error
    followed by pages of teardown output)."""
    last = tail(log_path, lines)
    first = failure_summary(log_path)
    return last if first in last else f"{first}\n...\n{last}"
