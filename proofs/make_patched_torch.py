"""Make a Python environment whose torch has Inductor's user-kernel naming escaped (#170398).

The installed torch stays untouched: a new venv gets a tree of symlinks to the installed torch
(the ~1 GB of compiled libraries are shared, not copied), a ``.pth`` pointing at the original
site-packages for everything else (triton, numpy...), and real copies of only the files patched.
The patch renames a user kernel ``__name`` to ``k__name`` where Inductor derives the wrapper's
variable name, so no class body can mangle it.

Usage: python make_patched_torch.py DEST  (prints the python to use)
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

PATTERN = re.compile(r'f"\{original_name\}_\{')
REPLACEMENT = 'f"{(\'k\' + original_name) if original_name.startswith(\'__\') else original_name}_{'


def main() -> None:
    dest = Path(sys.argv[1])
    spec = importlib.util.find_spec("torch")
    assert spec and spec.origin
    torch_dir = Path(spec.origin).parent
    if dest.exists():
        shutil.rmtree(dest)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(dest)], check=True)
    sp = next((dest / "lib").glob("python3*/site-packages"))
    (sp / "original-site-packages.pth").write_text(f"{torch_dir.parent}\n")
    shutil.copytree(torch_dir, sp / "torch", symlinks=True,
                    copy_function=lambda s, d: os.symlink(s, d))
    patched = 0
    for path in sorted((sp / "torch" / "_inductor").rglob("*.py")):
        text = path.read_text()
        if not PATTERN.search(text):
            continue
        new, n = PATTERN.subn(REPLACEMENT, text)
        path.unlink()
        path.write_text(new)
        patched += n
        for line in new.splitlines():
            if "startswith('__') else original_name" in line:
                print(f"patched {path.relative_to(sp)}: {line.strip()}", file=sys.stderr)
    if not patched:
        sys.exit("the naming expression was not found in torch/_inductor: the patch needs updating")
    print(dest / "bin" / "python")


if __name__ == "__main__":
    main()
