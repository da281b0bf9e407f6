"""GPU tests: opt-in (`pytest tests/gpu` on a machine with an NVIDIA GPU).

They start a real GPU server (`--device gpu --gpus 0`) on a loopback port and
reuse the end-to-end tests' server process helper.
"""

import importlib.util
import shutil
import subprocess
from pathlib import Path

import pytest
from invariants import report_invariants  # noqa: F401 - autouse: every benchmark report is checked

_spec = importlib.util.spec_from_file_location("kcoral_e2e_servers", Path(__file__).parents[1] / "e2e" / "conftest.py")
servers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(servers)


def _has_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def _gpu_total() -> int:
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout if _has_gpu() else ""
    return sum(1 for line in listed.splitlines() if line.startswith("GPU "))


def _gpu_server(tmp_path_factory, gpus: str, *flags: str):
    return servers.Server(
        tmp_path_factory.mktemp("gpu"),
        "--gpus",
        gpus,
        "--workers-per-gpu",
        "4",
        "--max-timeout-seconds",
        "120",
        *flags,
        device="gpu",
        ready_timeout=180,
    )


@pytest.fixture(scope="session")
def gpu_server(tmp_path_factory):
    if not _has_gpu():
        pytest.skip("no NVIDIA GPU on this machine")
    server = _gpu_server(tmp_path_factory, "0")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def two_gpu_server(tmp_path_factory):
    """A server on GPUs 0 and 1, for multi-GPU requests; skips on a one-GPU machine."""
    if _gpu_total() < 2:
        pytest.skip("needs two GPUs")
    server = _gpu_server(tmp_path_factory, "0,1")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def policy_server(gpu_server, tmp_path_factory):
    """policy_server(policy): a second server on GPU 0 with --housekeeping `policy`, one at a time."""
    running = {}

    def start(policy: str):
        for other in list(running):
            running.pop(other).stop()
        running[policy] = _gpu_server(tmp_path_factory, "0", "--housekeeping", policy)
        return running[policy]

    yield start
    for server in running.values():
        server.stop()


@pytest.fixture
def gpu_client(gpu_server):
    from kcoral import Client

    with Client(gpu_server.url) as client:
        yield client
