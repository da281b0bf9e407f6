"""Every test runs this checkout's kcoral package, whatever the environment's
.pth points at (several checkouts of the repository can share one Python), and
so do the servers and workers the tests start (they inherit PYTHONPATH)."""

import os
import sys
from pathlib import Path

_PYTHON = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, _PYTHON)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON, os.environ.get("PYTHONPATH")]))
