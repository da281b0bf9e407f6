"""House-keeping outside timing spans (pool/gpu_arbiter.h): stand-by workers
create their CUDA contexts, and retired ones destroy theirs, outside the
lease, but never while a benchmark on the same GPU times. The add-one
kernel's timed median and p99 with a stream of fresh workers churning beside
it must match a quiet GPU's, measured in the same run."""

import statistics
import sys
import threading
import time
from pathlib import Path

from kcoral import Client

from programs import TENSORS, single_call
from test_gpu_server import add_one_library, record  # noqa: F401 - the fixture

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
import cpu_compile_gpu_execute as seed  # noqa: E402

ROUNDS = 8


def timings(url: str, library: bytes) -> list[dict]:
    out = []
    with Client(url) as client:
        for _ in range(ROUNDS):
            result = client.execute(seed.benchmark_program(library), timeout_seconds=120)
            assert result.completed, result.error
            out.append(result.results["timing"])
    return out


def summary(runs: list[dict]) -> dict:
    return {"median_us": statistics.median(t["latency_ms_median"] for t in runs) * 1e3,
            "p99_us": statistics.median(t["latency_ms_p99"] for t in runs) * 1e3}


def test_house_keeping_beside_a_benchmark_leaves_its_median_and_p99_alone(gpu_server, add_one_library):  # noqa: F811
    quiet_before = summary(timings(gpu_server.url, add_one_library))

    # Trivial requests on fresh workers: each retires its worker (a context
    # destroyed) and brings a stand-by in (a context created).
    stop = threading.Event()
    churned = []

    def churn():
        with Client(gpu_server.url) as client:
            while not stop.is_set():
                result = client.execute(single_call(TENSORS, "plus_one", [1]), timeout_seconds=60)
                churned.append(result.completed)

    ready_before = sum(1 for e in gpu_server.events() if e["event"] == "worker_ready")
    threads = [threading.Thread(target=churn) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        time.sleep(1.0)
        busy = summary(timings(gpu_server.url, add_one_library))
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    quiet_after = summary(timings(gpu_server.url, add_one_library))

    events = gpu_server.events()
    contexts_created = sum(1 for e in events if e["event"] == "worker_ready") - ready_before
    span_waits = [e["span_wait_ms"] for e in events if e["event"] == "span_waited"]
    quiet = {k: (quiet_before[k] + quiet_after[k]) / 2 for k in quiet_before}
    record("quiet_spans", {"quiet_before": quiet_before, "busy": busy, "quiet_after": quiet_after,
                           "churn_requests": len(churned), "contexts_created": contexts_created,
                           "span_waits": len(span_waits),
                           "span_wait_ms_max": round(max(span_waits), 1) if span_waits else 0})
    assert all(churned) and contexts_created >= 10, (len(churned), contexts_created)
    assert abs(busy["median_us"] - quiet["median_us"]) <= 0.01 * quiet["median_us"] + 0.05
    assert busy["p99_us"] <= 1.05 * max(quiet_before["p99_us"], quiet_after["p99_us"]) + 0.1
