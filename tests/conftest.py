"""Every test runs this checkout's kcoral package, whatever the environment's
.pth points at (several checkouts of the repository can share one Python), and
so do the servers and workers the tests start (they inherit PYTHONPATH)."""

import os
import random
import socket
import sys
from pathlib import Path

import pytest

_PYTHON = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, _PYTHON)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON, os.environ.get("PYTHONPATH")]))

# Under pytest-xdist (`make e2e` runs the tests not marked serial with -n), each worker picks
# the ports of the servers it starts from a range of its own, below the kernel's ephemeral
# ports (kcoral.tools.nats_brokers.free_port; inherited by the benches a test runs): a port
# that one worker picked, or freed to restart a server on it, is never another worker's. The
# ranges of a run follow a base that its controller draws (its workers inherit it), so that two
# runs on one machine seldom share ports either.
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if not _WORKER:
    os.environ.setdefault("KCORAL_TEST_PORT_BASE", str(random.randrange(10000, 28000)))
elif _WORKER.startswith("gw"):
    _LOW = int(os.environ.get("KCORAL_TEST_PORT_BASE", "10000")) + 500 * int(_WORKER[2:])
    if _LOW + 499 < 32768:
        os.environ["KCORAL_PORT_RANGE"] = f"{_LOW}-{_LOW + 499}"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "serial: asserts latency, CPU share or timing that other tests on the machine's cores would move; "
        "`make e2e` runs these alone, after the parallel run of the others",
    )


@pytest.fixture
def dead_url():
    """A loopback URL where a connection is refused at once: the port is bound
    for the test's length (no one else takes it) and never listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"
