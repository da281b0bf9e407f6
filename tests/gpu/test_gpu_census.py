"""Who holds the GPU while a benchmark times (pool/gpu_census.h, issue 25): a process outside
the server that holds a CUDA context on the GPU is a condition on the benchmark, named by pid (it
is the machine's doing, not the candidate's, and an idle context runs nothing); the server's own
processes are not foreign at all. /health and /metrics report the GPU's duty."""

import os
import subprocess
import sys
import time

import httpx
from kcoral import Client

from test_gpu_server import add_one_library, seed  # noqa: F401 - the fixture

HOLDER = "import sys, torch; torch.empty(1, device='cuda'); print('up', flush=True); sys.stdin.read()"


def timed(url: str, library: bytes):
    with Client(url) as client:
        result = client.execute(seed.benchmark_program(library), timeout_seconds=120)
    assert result.completed, result.error
    return result, result.results["timing"]["integrity"]


def test_a_foreign_process_on_the_gpu_is_a_condition_on_the_benchmark(gpu_server, add_one_library):  # noqa: F811
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "0"}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True
    )
    try:
        assert holder.stdout.readline().strip() == b"up"
        result, integrity = timed(gpu_server.url, add_one_library)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    foreign = result.timing_spans["foreign_processes"]
    assert holder.pid in [p["pid"] for p in foreign], foreign
    assert integrity["verified"] is True
    assert integrity["trusted"] is True, integrity["flags"]
    conditions = integrity["conditions"]
    assert any("outside this server" in c and str(holder.pid) in c for c in conditions), conditions

    # Alone again: the server's own processes (its idle workers hold contexts too) are not foreign.
    time.sleep(1.0)
    result, integrity = timed(gpu_server.url, add_one_library)
    assert result.timing_spans["foreign_processes"] == []
    assert integrity["trusted"] is True, integrity["flags"]
    assert not [c for c in integrity.get("conditions", []) if c.startswith("gpu:")], integrity["conditions"]


def test_duty_is_in_health_and_metrics(gpu_server, add_one_library):  # noqa: F811
    timed(gpu_server.url, add_one_library)
    gpus = httpx.get(gpu_server.url + "/health", timeout=10).json()["gpu_scheduling"]["gpus"]
    assert [g["gpu"] for g in gpus] == [0]
    assert gpus[0]["timing_span_seconds"] > 0
    assert 0 < gpus[0]["duty_since_start"] <= 1 and 0 < gpus[0]["duty_last_60s"] <= 1
    metrics = httpx.get(gpu_server.url + "/metrics", timeout=10).text
    assert 'kcoral_gpu_duty_ratio{gpu="0",window="60s"}' in metrics
    assert 'kcoral_gpu_timing_span_seconds_total{gpu="0"}' in metrics
