"""Server flags: those that apply to GPU servers only are refused on a CPU
server, by name, instead of being accepted and ignored; --worker-cpu-threads
and --worker-heap-mbytes reach every worker, and every worker, forked by the
zygote or started on its own, sandboxed or not, is told its settings."""

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
    return subprocess.run(
        [sys.executable, "-m", "kcoral", "server", *flags], capture_output=True, text=True, timeout=60
    )


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


def run_main(server, source: str):
    """What `main` of `source` returns in one of the server's workers."""
    with Client(server.url) as client:
        result = client.execute(call(source))
    assert result.completed, result.error
    return result.results["out"]


def test_workers_get_the_cpu_threads_the_flag_names(make_server):
    server = make_server("--worker-cpu-threads", "3")
    assert run_main(server, READ_THREADS) == ["3", "3", "3"]
    health = httpx.get(server.url + "/health").json()
    assert health["worker_cpu_threads"] == 3
    assert health["tls"] is False  # plain HTTP without --tls-cert (tests/e2e/test_tls.py)


def test_workers_default_to_at_most_four_cpu_threads_whatever_the_server_inherited(make_server, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "64")  # inherited by the server below; dropped for its workers
    server = make_server()
    expected = str(min(4, os.cpu_count()))
    assert run_main(server, READ_THREADS) == [expected] * 3
    assert httpx.get(server.url + "/health").json()["worker_cpu_threads"] == int(expected)


def test_a_negative_cpu_thread_count_is_refused_by_name():
    run = server("--device", "cpu", "--worker-cpu-threads", "-1")
    assert run.returncode != 0
    assert "--worker-cpu-threads" in run.stderr


# Page faults of a program's first 16 MiB allocation, touched page by page (bytearray zeroes it).
FIRST_ALLOCATION_FAULTS = """
import resource


def main():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = bytearray(16 << 20)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""


def test_a_warm_heap_serves_the_first_allocation_without_faults(make_server):
    # 16 MiB is 4096 pages: without a warm heap each is faulted in at its first touch.
    cold = make_server("--sandbox", "none")  # a CPU server keeps no heap by default
    warm = make_server("--sandbox", "none", "--worker-heap-mbytes", "32")
    assert httpx.get(cold.url + "/health").json()["worker_heap_mbytes"] == 0
    assert httpx.get(warm.url + "/health").json()["worker_heap_mbytes"] == 32
    assert run_main(cold, FIRST_ALLOCATION_FAULTS) > 3000
    assert run_main(warm, FIRST_ALLOCATION_FAULTS) < 500


def test_a_heap_as_large_as_the_memory_limit_is_refused():
    run = server("--device", "cpu", "--worker-heap-mbytes", "256", "--worker-memory-limit-mbytes", "256")
    assert run.returncode == 2
    assert "--worker-heap-mbytes (256) must be below --worker-memory-limit-mbytes (256)" in run.stderr


READ_SETTINGS = """
from kcoral import _core


def main():
    s = _core.worker_settings()
    return [s.device, s.cpu_execution, s.heap_bytes, s.max_libraries, s.preload]
"""


@pytest.mark.parametrize("zygote", ["zygote", "no-zygote"])
@pytest.mark.parametrize("sandbox", ["namespaces", "none"])
def test_every_worker_is_told_its_settings_in_its_start_message(make_server, monkeypatch, zygote, sandbox):
    # The two settings only the environment sets are read by the server, not by its workers.
    monkeypatch.setenv("KCORAL_MAX_LIBRARIES_PER_WORKER", "7")
    monkeypatch.setenv("KCORAL_PRELOAD", " numpy , json")
    flags = ["--sandbox", sandbox, "--cpu-execution", "reference", "--worker-heap-mbytes", "8"]
    server = make_server(*flags, *(["--no-zygote"] if zygote == "no-zygote" else []))
    assert run_main(server, READ_SETTINGS) == ["cpu", "reference", 8 << 20, 7, ["numpy", "json"]]


def test_a_bad_library_cap_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("KCORAL_MAX_LIBRARIES_PER_WORKER", "many")
    run = server("--device", "cpu")
    assert run.returncode == 2
    assert "KCORAL_MAX_LIBRARIES_PER_WORKER must be a non-negative integer, not 'many'" in run.stderr
