"""Server flags: those that apply to GPU servers only are refused on a CPU
server, by name, instead of being accepted and ignored; --worker-cpu-threads
reaches every worker."""

import os
import subprocess
import sys

import httpx
import pytest
from conftest import call

from kcoral import Client

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
READ_THREADS = f"""
import os


def main():
    return [os.environ.get(name) for name in {THREAD_VARIABLES!r}]
"""


def server(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoral", "server", *flags], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("flag,value", [("--housekeeping", "beside-spans"), ("--cuda-max-connections", "2")])
def test_gpu_only_flags_are_refused_on_a_cpu_server(flag, value):
    run = server("--device", "cpu", flag, value)
    assert run.returncode == 2
    assert f"{flag} applies to GPU servers" in run.stderr


@pytest.mark.parametrize("flag,value", [("--housekeeping", "sometimes"), ("--cuda-max-connections", "0")])
def test_bad_values_name_the_flag(flag, value):
    run = server("--device", "gpu", flag, value)
    assert run.returncode != 0
    assert flag in run.stderr


def worker_threads(server) -> list:
    with Client(server.url) as client:
        result = client.execute(call(READ_THREADS))
    assert result.completed, result.error
    return result.results["out"]


def test_workers_get_the_cpu_threads_the_flag_names(make_server):
    server = make_server("--worker-cpu-threads", "3")
    assert worker_threads(server) == ["3", "3", "3"]
    assert httpx.get(server.url + "/health").json()["worker_cpu_threads"] == 3


def test_workers_default_to_at_most_four_cpu_threads_whatever_the_server_inherited(make_server, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "64")  # inherited by the server below; dropped for its workers
    server = make_server()
    expected = str(min(4, os.cpu_count()))
    assert worker_threads(server) == [expected] * 3
    assert httpx.get(server.url + "/health").json()["worker_cpu_threads"] == int(expected)


def test_a_negative_cpu_thread_count_is_refused_by_name():
    run = server("--device", "cpu", "--worker-cpu-threads", "-1")
    assert run.returncode != 0
    assert "--worker-cpu-threads" in run.stderr
