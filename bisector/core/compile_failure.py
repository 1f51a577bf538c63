"""Whether a failure is a ``torch.compile`` one: what a failing run printed names dynamo,
AOTAutograd, inductor or Triton, or the oracle itself calls ``torch.compile``.

Decided once for the reports' debugging lines (``app/report/compile_debug.py``) and for the compiler
bisector run at the culprit (``run/at_culprit.py``). Every pattern is searched line by line or
linearly: the texts are an oracle's output and an oracle's source, both untrusted.
"""

from __future__ import annotations

import re

# What a failing run prints when dynamo, AOTAutograd, inductor or Triton failed.
_COMPILE_OUTPUT = re.compile(r"torch[._/]_dynamo|torch[._/]_inductor|torch[._/]_functorch"
                             r"|\btriton\b|InductorError|BackendCompilerFailed|"
                             r"TorchRuntimeError|Unsupported: ", re.IGNORECASE)
# A failure after dynamo traced the graph (AOT/inductor/Triton): the minifier runs after AOT.
_AFTER_AOT = re.compile(r"_inductor|_functorch|triton|InductorError|BackendCompilerFailed",
                        re.IGNORECASE)
_USES_COMPILE = re.compile(r"\btorch\.compile\b|\btorch\._dynamo\.optimize\b")
# ``compile(..., backend=...)`` on one line: found line by line, first call then the keyword
# after it (``compile\(.*backend=`` rescans the line from every ``compile(``: quadratic).
_COMPILE_CALL = re.compile(r"\bcompile\(")


def is_compile_failure(failing_output: str, oracle_source: str) -> bool:
    """The failing output names the compiler stack, or the oracle calls torch.compile."""
    return bool(_COMPILE_OUTPUT.search(failing_output) or _USES_COMPILE.search(oracle_source)
                or any((m := _COMPILE_CALL.search(ln)) and "backend=" in ln[m.end():]
                       for ln in oracle_source.splitlines()))


def after_aot(failing_output: str) -> bool:
    """The failure came after dynamo traced the graph (AOTAutograd, inductor, Triton)."""
    return bool(_AFTER_AOT.search(failing_output))
