"""One redaction for everything that leaves bisector: terminal lines, Markdown and HTML reports,
JSON, the web view, events, logs, notification bodies and the reproduce line.

The store keeps the raw values (an index URL with its token is needed to run a bisection
again); every way out goes through here. Three kinds of secret are found, in a whole value or
anywhere inside free text:

* URLs: the userinfo (``user:token@``) becomes ``***@``, and the value of a query parameter
  whose name says it is a secret (``token``, ``key``, ``secret``, ``password``, ``auth``,
  ``signature``, ``sig``, ``access_token``, ...) becomes ``***``, its name kept
  (``?token=***``), so a reader still sees which index was used and that it needed a
  credential;
* ``NAME=VALUE`` assignments whose upper-case name holds TOKEN, SECRET, PASSWORD, KEY, AUTH,
  CREDENTIAL, ... (``--build-env HF_TOKEN=...``, an ``env`` block printed by an oracle);
* well-known token shapes (GitHub, Hugging Face, GitLab, Slack, AWS access keys) and
  ``Authorization:`` header values, wherever they stand.

:func:`data` walks a JSON-shaped value (the ``show`` data, a watch event) and redacts every
string in it, and every value whose key names a secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MASK = "***"

# What a name holds when its value is a secret (query parameters, variables, JSON keys).
_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "AUTH", "CREDENTIAL", "SIGNATURE",
          "COOKIE", "SESSION", "PRIVATE")
# Query parameter names that are secrets although they hold none of the words.
_EXACT_PARAMS = frozenset({"sig", "code", "pass", "jwt", "bearer"})

# A URL in free text is ``scheme://rest``: found from its ``://`` and walked back over the
# scheme's characters, never by a pattern tried at every word boundary (``\b[A-Za-z][...]*://``
# rescans ``a.a.a.a...`` from each dot: quadratic on any long dotted word an oracle prints).
_SCHEME = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_URL_END = re.compile(r"[\s<>\"'`]")
_USERINFO = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
# NAME=VALUE with an upper-case (environment-style) name; the value is quoted or runs to the
# next space. An opening quote before the name (``'HF_TOKEN=a b'``, as shlex writes it) makes
# the value run to the matching quote.
_ASSIGN = re.compile(r"(?P<q>['\"]?)\b(?P<name>[A-Z][A-Z0-9_]*)=")
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?"
                     r"[^\s'\"]+")
_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}"
    r"|glpat-[A-Za-z0-9_-]{20,}|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b")


def secret_name(name: str) -> bool:
    """Whether a variable, query parameter or key called ``name`` holds a secret."""
    upper = name.upper().replace("AUTHOR", "")  # GIT_AUTHOR_NAME is no credential
    return name.lower() in _EXACT_PARAMS or any(w in upper for w in _WORDS)


def _env_name(name: str) -> bool:
    """An environment-style (upper-case) name that holds a secret: lower-case ``key=`` in
    free text is far more often a Python keyword argument than a credential."""
    return name.isupper() and secret_name(name)


def _query(query: str) -> str:
    out = []
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        # ``&amp;`` in HTML: the name is what follows the entity.
        bare = name.rsplit(";", 1)[-1]
        out.append(f"{name}={MASK}" if eq and value and secret_name(bare) else part)
    return "&".join(out)


def url(value: str) -> str:
    """``value`` (one URL) without its userinfo and with its secret query values masked."""
    value = _USERINFO.sub(rf"\g<1>{MASK}@", value)
    head, q, rest = value.partition("?")
    if not q:
        return value
    query, hashmark, fragment = rest.partition("#")
    return f"{head}?{_query(query)}{hashmark}{fragment}"


def _assignment(s: str) -> str:
    out: list[str] = []
    at = 0
    for m in _ASSIGN.finditer(s):
        if m.start() < at or not _env_name(m.group("name")):
            continue
        start = m.end()
        quote = m.group("q")
        if quote:
            close = s.find(quote, start)
            end = len(s) if close < 0 else close
        elif start < len(s) and s[start] in "'\"":
            close = s.find(s[start], start + 1)
            end = len(s) if close < 0 else close + 1
        else:
            stop = re.compile(r"[\s'\"&,;]").search(s, start)
            end = len(s) if stop is None else stop.start()
        if end > start:
            out += [s[at:start], MASK]
            at = end
    out.append(s[at:])
    return "".join(out)


def _urls(s: str) -> list[tuple[int, int]]:
    r"""Where the URLs of ``s`` are, as ``\b[A-Za-z][A-Za-z0-9+.-]*://[^\s<>"'`]+`` finds
    them, in one pass: each scheme is the leftmost letter after a word boundary in the run of
    scheme characters before its ``://``."""
    found: list[tuple[int, int]] = []
    floor = at = 0
    while (sep := s.find("://", at)) >= 0:
        at = sep + 1
        first = sep
        while first > floor and s[first - 1] in _SCHEME:
            first -= 1
        start = next((k for k in range(first, sep) if s[k].isalpha() and s[k].isascii()
                      and (k == 0 or not (s[k - 1].isalnum() or s[k - 1] == "_"))), None)
        if start is None or sep + 3 >= len(s) or _URL_END.match(s, sep + 3):
            continue
        stop = _URL_END.search(s, sep + 3)
        end = len(s) if stop is None else stop.start()
        found.append((start, end))
        floor = at = end
    return found


def _in_text(found: str) -> str:
    """A URL found in text, less the punctuation that closes the sentence or a Markdown link
    around it."""
    body = found.rstrip(").,;:]")
    return url(body) + found[len(body):]


# Secret values known to this process (a secret variable's value given with --env or inherited,
# an index URL's password or token): masked wherever they appear, since an oracle may print
# them (`echo $MY_API_KEY`) in an output that reaches a report. Shorter values would mask
# ordinary words.
MIN_SECRET = 6
_KNOWN: set[str] = set()


def remember(values: Iterable[str]) -> None:
    """Mask these values in every text from now on (:func:`text`)."""
    for value in values:
        value = value.strip()
        if len(value) >= MIN_SECRET:
            _KNOWN.add(value)


def secrets_of(assignments: Iterable[str], urls: Iterable[str | None] = ()) -> list[str]:
    """The secret values among ``NAME=VALUE`` assignments (a secret name's value) and in URLs
    (a userinfo's password, a secret query parameter's value)."""
    out = [value for name, eq, value in (a.partition("=") for a in assignments)
           if eq and secret_name(name)]
    for u in urls:
        if not u or "://" not in u:
            continue
        userinfo = u.split("://", 1)[1].split("/", 1)[0].rpartition("@")[0]
        out += [userinfo.partition(":")[2] or userinfo] if userinfo else []
        for part in u.partition("?")[2].partition("#")[0].split("&"):
            name, eq, value = part.partition("=")
            if eq and secret_name(name):
                out.append(value)
    return out


def _known(s: str) -> str:
    for value in sorted(_KNOWN, key=len, reverse=True):
        s = s.replace(value, MASK)
    return s


def text(s: str) -> str:
    """Free text (a log line, an oracle's output, a command line, a whole report) with every
    known secret value, URL, secret assignment, header and known token shape in it
    redacted."""
    if not s:
        return s
    if _KNOWN:
        s = _known(s)
    out, at = [], 0
    for start, end in _urls(s):
        out += [s[at:start], _in_text(s[start:end])]
        at = end
    s = "".join([*out, s[at:]])
    s = _assignment(s)
    s = _HEADER.sub(lambda m: m.group(1) + (m.group(2) + " " if m.group(2) else "") + MASK, s)
    return _SHAPES.sub(MASK, s)


def data(value: Any) -> Any:
    """A JSON-shaped value with every string redacted (:func:`text`) and every scalar whose
    key names a secret replaced; the input is not changed."""
    if isinstance(value, str):
        return text(value)
    if isinstance(value, dict):
        return {k: MASK if _secret_key(k) and _scalar(v) and v != "" else data(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [data(v) for v in value]
    return value


def _scalar(v: Any) -> bool:
    return isinstance(v, str | int | float) and not isinstance(v, bool)


def _secret_key(key: object) -> bool:
    """Keys of bisector's own data are lower-case words (``sha256``, ``env_fingerprint``);
    a secret's key is an environment name (``HF_TOKEN``) or a plain secret word."""
    return isinstance(key, str) and (_env_name(key) or key.lower() in {
        "password", "passwd", "token", "secret", "access_token", "api_key", "apikey",
        "authorization", "auth", "credentials"})
