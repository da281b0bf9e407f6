"""Every test runs this checkout's kcoral package, whatever the environment's
.pth points at (several checkouts of the repository can share one Python), and
so do the servers and workers the tests start (they inherit PYTHONPATH)."""

import os
import socket
import sys
from pathlib import Path

import pytest

_PYTHON = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, _PYTHON)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON, os.environ.get("PYTHONPATH")]))


@pytest.fixture
def dead_url():
    """A loopback URL where a connection is refused at once: the port is bound
    for the test's length (no one else takes it) and never listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
