"""The filters of `bisect list` and of `bisect serve`'s list and JSON, read from the words a
person typed (options or a URL's query) into store/queries.Filters: one parser, so the CLI and
the web refuse the same values with the same one line.

Dates are UTC, as the store keeps them and the list prints them: ``2026-11-01`` (a whole day:
``--until 2026-11-01`` keeps that day), ``2026-11-01T14:30`` (an offset may follow), or an age
back from now (``90m``, ``12h``, ``7d``, ``2w``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta

from bisector.base import defaults
from bisector.base.errors import UsageError
from bisector.base.kinds import State
from bisector.store.queries import Filters

# The words a list takes (``disagree``: a flag on the command line, ``1`` in a URL).
FIELDS = ("state", "oracle", "repo", "culprit", "pr", "touching", "author", "since", "until",
          "text", "disagree")
AGE = re.compile(r"(\d+)([smhdw])")
AGE_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
HEX = re.compile(r"[0-9a-f]{4,40}")
MAX_TEXT = 1000  # a needle longer than any output tail the store keeps whole


def parse(values: Mapping[str, str | bool | None], limit: int = 50, offset: int = 0,
          dash: str = "--", now: datetime | None = None) -> Filters:
    """Filters from ``values`` (FIELDS, each a string or None); a bad one raises UsageError
    naming it as ``dash + name`` (``--since`` on the command line, ``since`` in a URL)."""
    v = {k: str(values.get(k) or "").strip() for k in FIELDS if k != "disagree"}
    now = now or datetime.now(UTC)

    def bad(name: str, why: str) -> UsageError:
        return UsageError(f"{dash}{name} {v[name]!r}: {why}")

    if v["state"] and v["state"] not in {s.value for s in State}:
        raise bad("state", f"not a state: give one of {', '.join(s.value for s in State)}")
    culprit, pr = _culprit(v["culprit"], bad)
    if v["pr"]:  # --pr N: the culprit's pull request, as --culprit '#N'
        if not (v["pr"].lstrip("#").isdigit() and len(v["pr"]) < 11):
            raise bad("pr", "give a pull request number, e.g. 143328")
        if pr is not None and culprit == "" and pr != int(v["pr"].lstrip("#")):
            raise bad("pr", f"and --culprit {v['culprit']!r} name two pull requests")
        pr = int(v["pr"].lstrip("#"))
    touching = v["touching"].removeprefix("./").strip("/")
    if v["touching"] and (not touching or v["touching"].startswith("/") or ".." in
                          touching.split("/")):
        raise bad("touching", "give a path inside the repository, e.g. torch/_inductor or "
                              "torch/_inductor/lowering.py")
    if len(v["text"]) > MAX_TEXT:
        raise bad("text", f"longer than {MAX_TEXT} characters")
    since = _when(v["since"], end=False, now=now, bad=lambda why: bad("since", why))
    until = _when(v["until"], end=True, now=now, bad=lambda why: bad("until", why))
    if since is not None and until is not None and since >= until:
        raise UsageError(f"{dash}since {v['since']!r} is not before {dash}until "
                         f"{v['until']!r}: nothing can match")
    if not 1 <= limit <= defaults.MAX_LIMIT:
        raise UsageError(f"{dash}limit {limit}: give 1 to {defaults.MAX_LIMIT}")
    if not 0 <= offset <= defaults.MAX_ID:
        raise UsageError(f"{dash}offset {offset}: give 0 or more")
    return Filters(state=v["state"], oracle=v["oracle"], repo=v["repo"], culprit=culprit,
                   pr=pr, touching=touching, author=v["author"], since=since, until=until,
                   text=v["text"], disagree=_flag(values.get("disagree"), dash),
                   limit=limit, offset=offset)


def _flag(value: object, dash: str) -> bool:
    """``--disagree`` (a flag: True) or ``disagree=1`` in a URL (a checkbox sends ``1``)."""
    if value in (None, False, "", "0", "false", "no", "off"):
        return False
    if value in (True, "1", "true", "yes", "on"):
        return True
    raise UsageError(f"{dash}disagree {value!r}: give 1 (or leave it out)")


def _culprit(value: str, bad: Callable[[str, str], UsageError]) -> tuple[str, int | None]:
    """A sha prefix, a pull request (``#143328``), or digits that may be either."""
    if not value:
        return "", None
    word = value.lower()
    if word.startswith("#") and word[1:].isdigit() and len(word) < 11:
        return "", int(word[1:])
    if HEX.fullmatch(word):
        return word, int(word) if word.isdigit() and len(word) < 10 else None
    if word.isdigit() and len(word) < 10:
        return "", int(word)
    raise bad("culprit", "give a sha prefix (4 hex digits or more) or a pull request "
                         "(#143328)")


def _when(value: str, *, end: bool, now: datetime,
          bad: Callable[[str], UsageError]) -> datetime | None:
    if not value:
        return None
    if m := AGE.fullmatch(value):
        return now - timedelta(seconds=int(m[1]) * AGE_UNITS[m[2]])
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise bad("not a date: give 2026-11-01, 2026-11-01T14:30 (UTC) or an age like "
                  "7d") from None
    if len(value) == 10 and end:  # a day alone: all of it
        t += timedelta(days=1)
    return t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)


def url_query(words: Mapping[str, str | bool | None]) -> dict[str, str]:
    """The filters as a URL's query keeps them (the words as typed, the empty ones left
    out): the list page's links carry them, so a filtered page is a link to paste."""
    kept = {k: str(words.get(k) or "") for k in FIELDS if words.get(k)}
    if "disagree" in kept:
        kept["disagree"] = "1" if _flag(words.get("disagree"), "") else ""
    return {k: v for k, v in kept.items() if v}
