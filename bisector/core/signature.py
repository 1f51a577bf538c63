"""The failure that is the bug: an oracle's run against the signature it names.

Without a signature every non-zero exit is "bad", so a commit that fails for another reason
(an ImportError on an old commit, a missing fixture, a crash in unrelated code) looks like the
regression and the search ends on the wrong commit. An oracle names its failure with ``match``
(a regular expression, ``[tool.bisector] match`` or ``--match``): a run that would show the
bug but whose output does not match it is a skip, "a different failure", never a verdict.

Which run "would show the bug" depends on the polarity: with ``failure`` (the usual oracle)
it is a failing run; with ``success`` (a repro script that exits 0 when the bug reproduces) it
is a passing one. The signature always describes the run that shows the bug, so the polarity
it was judged under is part of the oracle's identity whenever a signature is (see
:attr:`bisector.oracle.script.Oracle.sha256`): outcomes stay raw facts about a commit under one key.

:func:`signature` turns a pasted traceback into such a regex for ``bisect oracle new``.
"""

from __future__ import annotations

import re

from bisector.core.verdict import Outcome, Polarity

# A line that names an exception: ``RuntimeError: ...``, ``torch._dynamo.exc.Unsupported: ...``,
# pytest's ``E   AssertionError: ...`` once its marker is stripped.
_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure|Failed|"
    r"Warning|Unsupported)\b(?::|$)")
_NAMED = re.compile(r"^[A-Za-z_][\w.]*(?::|$)")
_VARIABLE = re.compile(r"0x[0-9a-fA-F]+|\d+")
LONGEST = 200  # characters of the failure line a signature keeps (a prefix still matches)


def compile_match(regex: str) -> re.Pattern[str]:
    """The signature compiled as it is searched (``re.MULTILINE``); ValueError says why not."""
    if not regex:
        raise ValueError("an empty pattern matches every output")
    try:
        return re.compile(regex, re.MULTILINE)
    except re.error as e:
        raise ValueError(str(e)) from None


def last_line(stderr: str, stdout: str = "") -> str:
    """The last non-empty line of stderr (where tracebacks go), else of stdout."""
    for text in (stderr, stdout):
        for line in reversed(text.splitlines()):
            if line.strip():
                return line.strip()[:LONGEST]
    return "(no output)"


def shows_bug(outcome: Outcome, bug: Polarity) -> bool:
    """Whether a raw outcome is the one that means "the bug" under ``bug``'s polarity."""
    return outcome is (Outcome.FAIL if bug is Polarity.FAILURE else Outcome.PASS)


def refine(outcome: Outcome, stdout: str, stderr: str, regex: str,
           bug: Polarity) -> tuple[Outcome, str] | None:
    """A run that shows the bug but not its signature: (SKIP, reason); otherwise None.

    Timeouts, skips and the outcome that means "no bug" are left as they are: the signature
    only tells the bug's failure from another one.
    """
    if not shows_bug(outcome, bug):
        return None
    if compile_match(regex).search(f"{stdout}\n{stderr}"):
        return None
    what = "a different failure" if outcome is Outcome.FAIL else "passed without the signature"
    return Outcome.SKIP, f"{what}: {last_line(stderr, stdout)}"


def cannot_import(text: str, package: str, package_error: str | None = None) -> str | None:
    """The line of ``text`` saying that ``package`` itself cannot be imported, else None.

    That is ``No module named '<package>'`` (the environment does not have it: the wrong
    interpreter, an install that failed), or the very error the environment's own import of
    the package raised when its facts were taken (``package_error``, a missing shared library
    say). Either says nothing about the commit, so it must never be a verdict. A missing
    submodule (``No module named 'torch.foo'``) of a package that imports is left alone: that
    can be the regression."""
    missing = re.compile(rf"^\s*(?:ModuleNotFoundError|ImportError): No module named "
                         rf"'?{re.escape(package)}'?\s*$", re.MULTILINE)
    m = missing.search(text)
    if m:
        return m.group().strip()
    if package_error:
        for line in text.splitlines():
            if line.strip() and line.strip() == package_error.strip():
                return line.strip()[:LONGEST]
    return None


def failure_line(text: str) -> str | None:
    """The line that says what failed: the exception line of the last Python traceback (the
    first unindented line after it), else the last line naming an exception (pytest's ``E``
    lines included), else None."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call")]
    if starts:
        for ln in lines[starts[-1] + 1:]:
            if not ln[:1].isspace() and _NAMED.match(ln):  # any class, MyBug included
                return ln.strip()
    for ln in reversed(lines):
        stripped = re.sub(r"^(?:E\s+|FAILED\s+\S+\s+-\s+)", "", ln.strip())
        if _EXCEPTION.match(stripped):
            return stripped
    return None


# Where a path's variable part ends and the file it names begins: an installed package's
# modules sit under a ``site-packages`` (or Debian's ``dist-packages``) folder whose prefix is
# the probe's own environment.
_PACKAGES = ("/site-packages/", "/dist-packages/")
# A word of a failure line: what a path, a number or an address can be part of. Split on
# quotes, brackets and separators, so ``'/tmp/x/a.py'`` and ``(file.py, line 3)`` give words.
_WORD = re.compile(r"[^\s'\"`()\[\]{},;<>]+")
_HEX_WORD = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b")


def normalise(line: str) -> str:
    """A failure line with what differs from probe to probe for the same failure made equal:
    absolute paths (the probe's exported tree, its environment, its temporary folder, the
    clone, a home folder) reduced to the file they name, a site-packages prefix to
    ``<site-packages>/`` and the module path after it, hexadecimal addresses (``0x7f3a...``),
    commit-like hexadecimal words and numbers generalised.

    Word by word with string methods and one pass of three regexes without nested repetition:
    linear in the line's length (a failure line is untrusted output, see issue 32)."""
    line = line.strip()[:4 * LONGEST]
    out, at = [], 0
    for m in _WORD.finditer(line):
        out.append(line[at:m.start()])
        out.append(_path(m.group()))
        at = m.end()
    out.append(line[at:])
    text = "".join(out)
    text = _HEX_WORD.sub("<hex>", re.sub(r"0x[0-9a-fA-F]+", "<address>", text))
    return re.sub(r"\d+", "<n>", text)[:LONGEST]


def _path(word: str) -> str:
    """``word`` with the folders of this run taken out (see :func:`normalise`)."""
    for mark in _PACKAGES:
        i = word.rfind(mark)
        if i >= 0:
            return "<site-packages>/" + word[i + len(mark):]
    if word.startswith("/") and "/" in word[1:]:
        return "<path>/" + word.rsplit("/", 1)[1]
    return word


def same_failure(hunted: str, failure: str | None) -> bool:
    """Whether a run's failure line is the hunted one, once both are normalised.

    Equality of the lines, not a search of the run's whole output as ``--match`` does: the
    hunted failure is what the bad endpoint *ended* with, and a run whose output mentions it
    somewhere (a warning, an exception caught and logged) but ended on another one did not
    fail this way. A run with no failure line (a crash, a bare ``exit 1``) is not the hunted
    failure either."""
    return failure is not None and normalise(failure) == normalise(hunted)


# The fact a failing run records: its failure line (``failure_line`` over its whole output),
# "" when it has none; absent in runs stored before it was recorded (read from the tail then).
FAILURE_FACT = "failure"


def failure_of(recorded: object, output_tail: str) -> str | None:
    """A stored run's failure line: the one recorded when it ran (read from its whole output),
    else, for a run stored before that was recorded, the one its stored tail shows."""
    if isinstance(recorded, str):
        return recorded or None
    return failure_line(output_tail)


def signature(text: str) -> str | None:
    """A regex for the failure a traceback ends with: its exception line, regex-escaped, with
    hexadecimal addresses and numbers generalised (``0x7f3a...`` and ``42`` differ from run to
    run and machine to machine; the exception and its words do not). None: no failure found."""
    line = failure_line(text)
    if line is None:
        return None
    line = line[:LONGEST]
    out, at = [], 0
    for m in _VARIABLE.finditer(line):
        out.append(_escape(line[at:m.start()]))
        out.append(r"0x[0-9a-fA-F]+" if m.group().startswith("0x") else r"\d+")
        at = m.end()
    out.append(_escape(line[at:]))
    return "".join(out)


def _escape(text: str) -> str:
    """``re.escape`` without escaping spaces (only special in verbose patterns, never used
    here), so the signature written into an oracle stays readable."""
    return re.escape(text).replace("\\ ", " ")
