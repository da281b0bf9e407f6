"""Our client against the reference server (PyPI kcoral==0.1.1), in a virtual
environment of its own: it has no blob endpoints, so large blobs fall back to
local hashing and the CACHE_MISS negotiation (docs/data-path.md "The client")."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from test_reference_client import reference_environment, write_fetching_job

HERE = Path(__file__).resolve().parent
VENV = HERE.parents[1] / "build" / "reference-server-venv"
PACKAGES = ["kcoral==0.1.1", "fastapi", "uvicorn", "httpx", "numpy", "ml_dtypes", "apache-tvm-ffi"]
MIB = 1 << 20


def reference_server_python() -> Path:
    python = VENV / "bin" / "python"
    marker = VENV / ".kcoral-0.1.1-server"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f"{VENV.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # under pytest-xdist another worker may be making it
        if not marker.exists():
            venv.create(VENV, with_pip=True, clear=True)
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", *PACKAGES], capture_output=True, text=True
            )
            if install.returncode != 0:
                pytest.fail(f"cannot install the reference server: {install.stderr[-2000:]}")
            marker.touch()
    return python


@pytest.fixture(scope="module")
def reference_server(tmp_path_factory):
    """One reference server for the module (it takes seconds to start)."""
    tmp_path = tmp_path_factory.mktemp("reference-server")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [
            str(reference_server_python()),
            "-m",
            "kcoral",
            "server",
            "--device",
            "cpu",
            "--sandbox",
            "none",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-dir",
            str(tmp_path / "logs"),
            "--no-log-console",
        ],
        stdout=subprocess.DEVNULL,
        stderr=open(tmp_path / "stderr", "wb"),
        start_new_session=True,
        env=reference_environment(),
        cwd="/",
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert process.poll() is None, (tmp_path / "stderr").read_text()[-2000:]
            assert time.monotonic() < deadline, "the reference server did not start"
            time.sleep(0.2)
        yield url
    finally:
        os.killpg(process.pid, 15)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


def test_our_client_falls_back_where_there_are_no_blob_endpoints(reference_server):
    sys.path.insert(0, str(HERE.parents[1] / "python"))
    from kcoral import Client, Program

    large, small = os.urandom(2 * MIB + 1), b"small"
    with Client(reference_server) as client:
        for _ in range(2):  # cold, then the same objects again (cached there)
            program = Program()
            big = program.upload(kind="bytes", value=large)
            little = program.upload(kind="bytes", value=small)
            module = program.upload(kind="module", source="def main(a, b):\n    return [len(a), bytes(b)]\n")
            fn = program.get_function(module=module, name="main")
            program.return_(key="out", value=program.run(fn=fn, args=[big, little]))
            result = client.execute(program, timeout_seconds=60)
            assert result.completed, result.error
            assert result.results["out"] == [len(large), small]
        assert client._preflights[client.base_url].supported is False


def test_our_kcoral_run_against_the_reference_server(reference_server, tmp_path):
    """`kcoral run python` (spec/benchmark.md §3) needs nothing of a server
    beyond the generic protocol: ours works against the reference's."""
    script = write_fetching_job(tmp_path)
    out = tmp_path / "out"
    kcoral = [sys.executable, "-m", "kcoral", "run"]
    run = subprocess.run(
        [
            *kcoral,
            "python",
            "--url",
            reference_server,
            "--send",
            str(script),
            "-e",
            "FOO=bar",
            "--out",
            str(out),
            "--fetch",
            "res",
            "--fetch",
            "absent",
            "--",
            "job.py",
            "a b",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 3, run.stderr[-4000:]
    assert run.stdout == "args ['a b'] bar True\n"
    assert (out / "res" / "sub" / "r.txt").read_text() == "result"
    assert "kcoral: missing artifacts: absent" in run.stderr
