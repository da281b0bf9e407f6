"""Puts the in-tree kcoral package on the active Python environment.

`make build` compiles kcoral._core and kcoral-server into python/kcoral; this
adds a .pth file pointing at python/ and a `kcoral` launcher next to the
interpreter, so `kcoral server ...` works from any directory. Idempotent.
"""

import shutil
import subprocess
import stat
import sys
import sysconfig
from pathlib import Path

root = Path(__file__).resolve().parents[1]
site = Path(sysconfig.get_paths()["purelib"])
(site / "kcoral_dev.pth").write_text(str(root / "python") + "\n")

launcher = Path(sys.executable).parent / "kcoral"
launcher.write_text(f"#!{sys.executable}\nfrom kcoral.cli import main\nraise SystemExit(main())\n")
launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
if shutil.which("pyenv"):
    subprocess.run(["pyenv", "rehash"], check=False)  # pyenv finds new commands through shims
print(f">> kcoral is on the path: {launcher}")
