"""The ``--manual`` shell: bash in a private copy of the commit's tree, with the probed
environment first on PATH *after* the person's own start-up files.

A plain ``PATH=env/bin:$PATH $SHELL`` is not enough: an interactive shell reads ``~/.bashrc``
(``~/.zshrc``...) after it starts, and pyenv, conda or a ``python`` alias set up there come
before the probed environment; the person then judges another interpreter's torch without
knowing it. So the shell is bash started with a generated ``--rcfile`` that

1. reads the start-up files bash itself would (``/etc/bash.bashrc``, ``~/.bashrc``), so the
   person's prompt, aliases and tools are there;
2. then puts the environment's ``bin`` first, drops ``python``/``pip`` aliases and functions,
   clears ``PYTHONPATH``/``PYTHONHOME`` (as the executors do for an oracle), and keeps the
   environment first after every prompt hook (``PROMPT_COMMAND``: pyenv-virtualenv and conda
   re-activate there);
3. says in its first lines which ``python`` the shell runs (its path and the probed package's
   version and ``git_version``), and warns when it is not the environment's.

Other shells (zsh, fish) are not started: their start-up files would run last with nothing
after them. bash is what is opened, and the first lines say so; without bash the line opens
the environment's Python itself, which reads no shell start-up file at all.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

# Prints "<package> <__version__> git <git_version>" of the package as `python` imports it
# (-I: not the tree's source folder of the same name, which the current folder would shadow).
_VERSION_CODE = ("import importlib, sys; n = sys.argv[1]; m = importlib.import_module(n); "
                 "v = getattr(m, 'version', None); "
                 "print(n, getattr(m, '__version__', '?'), 'git', "
                 "getattr(v, 'git_version', getattr(m, 'git_version', '?')))")
_PYTHON_CODE = "import sys; print('Python', sys.version.split()[0])"


def shell_rc(env: Path, tree: Path, commit: str, obtained: str, package: str | None,
             user_shell: str) -> str:
    """The bash start-up file of one probe's manual shell (see the module docstring)."""
    q = shlex.quote
    bin_dir = env / "bin"
    check = (f"python -I -c {q(_VERSION_CODE)} {q(package)}" if package
             else f"python -I -c {q(_PYTHON_CODE)}")
    other = Path(user_shell).name if user_shell else ""
    shell_note = (f"; this is bash, not your {other}: its start-up files could put another "
                  f"python first" if other and other != "bash" else "")
    return f"""\
# bisector: the --manual shell of one probe (generated; removed with the tree after the answer)
# 1. what any interactive bash reads (bash --rcfile replaces both)
if [ -f /etc/bash.bashrc ]; then . /etc/bash.bashrc; fi
if [ -f "$HOME/.bashrc" ]; then . "$HOME/.bashrc"; fi
# 2. then the probed environment first, whatever they set up
__bisector_bin={q(str(bin_dir))}
__bisector_first() {{
  local p=":$PATH:"
  p="${{p//:$__bisector_bin:/:}}"; p="${{p#:}}"; p="${{p%:}}"
  PATH="$__bisector_bin${{p:+:$p}}"
  hash -r
}}
unalias python python3 pip pip3 2>/dev/null
unset -f python python3 pip pip3 2>/dev/null
unset PYTHONPATH PYTHONHOME CONDA_PREFIX
export VIRTUAL_ENV={q(str(env))}
__bisector_first
export PATH
if (( BASH_VERSINFO[0] > 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] >= 1) )); then
  PROMPT_COMMAND+=(__bisector_first)
else
  PROMPT_COMMAND="${{PROMPT_COMMAND:+$PROMPT_COMMAND;}}__bisector_first"
fi
PS1="(bisect {commit[:12]}) ${{PS1-\\$ }}"
cd -- {q(str(tree))} || exit 1
# 3. say which python this is
__bisector_py="$(command -v python)"
printf 'bisector: %s (%s) in a private copy of its tree: %s (removed after your answer%s)\\n' \\
  {q(commit[:12])} {q(obtained)} "$PWD" {q(shell_note)} >&2
printf 'bisector: python is %s: %s\\n' "$__bisector_py" \\
  "$(cd / && {check} 2>&1 | tail -n 1)" >&2
if [ "$__bisector_py" != "$__bisector_bin/python" ]; then
  printf 'bisector: warning: that is not the probed environment'"'"'s python (%s)\\n' \\
    "$__bisector_bin/python" >&2
fi
printf 'bisector: try it here, then type exit and answer\\n' >&2
"""


def shell_line(rc: Path, env: Path, tree: Path) -> str:
    """One line a person pastes into a terminal (and ``shell`` at the prompt runs): bash with
    :func:`shell_rc`'s file; without bash, the environment's Python in the tree."""
    q = shlex.quote
    if shutil.which("bash"):
        return f"bash --rcfile {q(str(rc))} -i"
    return (f"cd {q(str(tree))} && env -u PYTHONPATH -u PYTHONHOME "
            f"VIRTUAL_ENV={q(str(env))} PATH={q(str(env / 'bin'))}:\"$PATH\" "
            f"{q(str(env / 'bin' / 'python'))}")
