"""The GPU execution server on a real GPU: leases, tensors, libraries,
cpu_only enforcement, sticky errors, kernel timeouts and the CUPTI benchmark."""

import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from kcoral import Client, KCoralError, Program

from programs import CPU_ONLY, HOLDS_THE_GPU, ILLEGAL_ADDRESS, SPINS_FOREVER, TENSORS, single_call

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))
import cpu_compile_gpu_execute as seed  # noqa: E402

REPORT = os.environ.get("KCORAL_GPU_REPORT")


def record(key: str, value) -> None:
    """Figures for the closing note, gathered by scripts/gpu-check.sh."""
    print(f"[figure] {key} = {value}")
    if REPORT:
        path = Path(REPORT)
        data = json.loads(path.read_text()) if path.exists() else {}
        data[key] = value
        path.write_text(json.dumps(data, indent=2))


@pytest.fixture(scope="module")
def add_one_library(gpu_server):
    with Client(gpu_server.url) as client:
        arch = client.target()["arch"]
        compiled = client.execute(seed.compile_program(arch), timeout_seconds=120)
    assert compiled.completed, compiled.error
    return compiled.results["library"]


def test_health_reports_the_gpu(gpu_client):
    health = gpu_client.health()
    assert health["gpu_count"] == 1
    assert health["target"]["arch"].startswith("sm_")
    assert health["target"]["arch"] == "sm_90a" or not health["target"]["arch"].startswith("sm_9")
    assert {"torch", "cuda", "tvm_ffi"} <= set(health["versions"])


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "int64", "uint8", "bool"])
def test_tensor_round_trip(gpu_client, dtype):
    import ml_dtypes  # noqa: F401 - bfloat16 arrays

    rng = np.random.default_rng(0)
    if dtype == "bool":
        value = rng.integers(0, 2, (3, 5)).astype(bool)
    elif dtype == "bfloat16":
        value = rng.standard_normal((3, 5)).astype(np.dtype("bfloat16"))
    else:
        value = (rng.standard_normal((3, 5)) * 10).astype(dtype)
    program = Program()
    x = program.upload(id="x", kind="tensor", value=value)
    module = program.upload(id="m", kind="module", source=TENSORS)
    identity = program.get_function(id="identity", module=module, name="identity")
    out = program.run(id="out", fn=identity, args=[x])
    program.return_(key="out", value=out)
    result = gpu_client.execute(program)
    assert result.completed, result.error
    returned = result.results["out"]
    assert returned.dtype == value.dtype and returned.shape == value.shape
    assert np.array_equal(returned.view(np.uint8), value.view(np.uint8))
    assert result.lease_held_ms > 0


@pytest.mark.parametrize("rows", [5, 17])
def test_large_tensor_goes_through_pinned_staging_bit_exact(gpu_client, rows):
    # 20 MB: one lane, four whole 4 MiB staging chunks and a partial one; 68 MB: four lanes
    # (the workers' host threads), slices that end inside a chunk (src/native/staged_copy.cc).
    value = np.random.default_rng(rows).standard_normal((rows, 1_000_003)).astype(np.float32)
    program = Program()
    x = program.upload(id="x", kind="tensor", value=value)
    module = program.upload(id="m", kind="module", source=TENSORS)
    out = program.run(id="out", fn=program.get_function(id="plus_one", module=module, name="plus_one"), args=[x])
    program.return_(key="out", value=out)
    result = gpu_client.execute(program)
    assert result.completed, result.error
    assert np.array_equal(result.results["out"], value + 1)


def test_library_load_and_missing_export(gpu_client, add_one_library):
    for name, expected in (("add_one", "COMPLETED"), ("no_such_function", "FAILED")):
        program = Program()
        library = program.upload(id="lib", kind="library", value=add_one_library)
        program.get_function(id="fn", module=library, name=name)
        result = gpu_client.execute(program)
        assert result.status == expected, result.error
        if expected == "FAILED":
            assert result.error["kind"] == "compile"
            assert result.error["instruction_id"] == "fn"


def test_add_one_kernel_checks_and_benchmarks(gpu_client, add_one_library):
    result = gpu_client.execute(seed.benchmark_program(add_one_library), timeout_seconds=120)
    assert result.completed, result.error
    assert result.results["check"] == {"ok": True}
    timing = result.results["timing"]
    expected_keys = {
        "latency_ms_median",
        "latency_ms_mean",
        "latency_ms_min",
        "latency_ms_max",
        "activities_stable",
        "flush_l2",
        "warmup",
        "repeat",
    }
    assert expected_keys <= set(timing)
    assert {"latency_ms_std", "latency_ms_p5", "latency_ms_p50", "latency_ms_p99", "n_samples"} <= set(timing)
    assert timing["timer"] == "cupti"
    assert timing["flush_l2"] is True and timing["activities_stable"] is True
    assert timing["n_samples"] == timing["repeat"] >= 1
    assert 0 < timing["latency_ms_min"] <= timing["latency_ms_median"] <= timing["latency_ms_max"]
    # Units are milliseconds: a 1M-element add is microseconds, not seconds.
    assert timing["latency_ms_median"] < 1.0
    assert result.lease_held_ms > 0 and result.lease_wait_ms >= 0


HBM_TB_PER_S = {"H200": 4.8, "H100": 3.35}


def test_add_one_median_is_near_the_hbm_bound_and_stable(gpu_client, add_one_library):
    medians = []
    for _ in range(5):
        result = gpu_client.execute(seed.benchmark_program(add_one_library), timeout_seconds=120)
        assert result.completed, result.error
        medians.append(result.results["timing"]["latency_ms_median"] * 1e3)
    spread = (max(medians) - min(medians)) / statistics.median(medians)
    record("add_one_median_us_runs", [round(m, 3) for m in medians])
    record("add_one_median_us", round(statistics.median(medians), 3))
    record("add_one_spread_fraction", round(spread, 4))
    assert spread < 0.02
    # 8 MiB moved at the card's HBM bandwidth, within 3x: 1.75 us on an H200 (4.8 TB/s), 2.5 us
    # on an H100 (3.35 TB/s; it measured 5.4 us, as in docs/mcp.md).
    query = ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"]
    name = subprocess.run(query, capture_output=True, text=True, check=True).stdout
    bandwidth = next((tb_s for card, tb_s in HBM_TB_PER_S.items() if card in name), None)
    if bandwidth is None:
        pytest.skip(f"no HBM bandwidth known for {name.strip()!r}: the spread was checked, not the bound")
    assert statistics.median(medians) < 3 * (8 * 2**20 / (bandwidth * 1e12) * 1e6)


def test_cpu_only_call_touching_cuda_is_gpu_access(gpu_client):
    result = gpu_client.execute(single_call(CPU_ONLY, "touches_cuda", [], cpu_only=True))
    assert result.status == "FAILED"
    error = result.error
    assert error["kind"] == "gpu_access"
    assert error["cuda_call"]
    assert "<uploaded:" in error["location"]
    assert "interfered_request_id" in error
    assert error["instruction_id"] == "out"


def test_cpu_only_compile_lets_a_neighbour_measure(gpu_server):
    results = {}

    def run(key, program):
        with Client(gpu_server.url) as client:
            results[key] = client.execute(program, timeout_seconds=60)

    compile_like = threading.Thread(
        target=run, args=("compile", single_call(CPU_ONLY, "compiles_for", [2.0], cpu_only=True))
    )
    compile_like.start()
    time.sleep(0.5)
    run("measure", single_call(HOLDS_THE_GPU, "holds", [0.2]))
    compile_like.join()
    assert results["compile"].completed and results["measure"].completed
    assert results["compile"].elapsed_ms > 1500
    # The neighbour never waits for the compile's cpu_only call. It may wait for house-keeping:
    # the server logs whom it waited for, and on the H200 that was a fresh stand-by creating its
    # CUDA context under the lease ("initialize", 303 ms) or a retiring worker's teardown
    # ("retire"): issue 8 found a 419 ms wait and asked what it was.
    waited = [
        e
        for e in gpu_server.events()
        if e.get("event") == "lease_waited" and e.get("request_id") == results["measure"].request_id
    ]
    holders = waited[0]["holders"] if waited else []
    record("neighbour_lease_wait", {"ms": round(results["measure"].lease_wait_ms, 1), "holders": holders})
    assert results["compile"].request_id not in holders
    assert set(holders) <= {"initialize", "retire"}, holders
    if not holders:
        assert results["measure"].lease_wait_ms < 50
    assert results["compile"].lease_held_ms < 1000  # the 2 s call ran off the lease


def test_lease_is_fifo_and_accounted(gpu_server):
    results = {}

    def run(key):
        with Client(gpu_server.url) as client:
            results[key] = client.execute(single_call(HOLDS_THE_GPU, "holds", [0.5]), timeout_seconds=60)

    threads = []
    for key in range(3):
        threads.append(threading.Thread(target=run, args=(key,)))
        threads[-1].start()
        time.sleep(0.1)
    for t in threads:
        t.join()
    finished = [results[k].results["out"]["finished"] for k in range(3)]
    assert finished == sorted(finished), "the lease is granted in arrival order"
    for k in range(3):
        assert results[k].lease_held_ms >= 500
        assert results[k].lease_wait_ms + results[k].lease_held_ms <= results[k].elapsed_ms + 1
    # The third waited for the other two holders.
    assert results[2].lease_wait_ms > 700
    # Its timeline puts the wait on the instruction that asked for the lease (the module upload).
    [timeline] = [
        e for e in gpu_server.events() if e["event"] == "run_timeline" and e["request_id"] == results[2].request_id
    ]
    waits = [wait for _, _, wait, _ in timeline["instructions"]]
    assert abs(waits[0] - results[2].lease_wait_ms) < 1 and sum(waits[1:]) < 1
    record("lease_wait_ms_fifo", [round(results[k].lease_wait_ms, 1) for k in range(3)])


def test_sticky_cuda_error_fails_only_its_request_and_retires_the_worker(gpu_server, gpu_client):
    bystander = {}

    def neighbour():
        with Client(gpu_server.url) as client:
            bystander["result"] = client.execute(single_call(HOLDS_THE_GPU, "holds", [0.3]))

    thread = threading.Thread(target=neighbour)
    thread.start()
    result = gpu_client.execute(single_call(ILLEGAL_ADDRESS, "writes_through_null", []))
    thread.join()
    assert result.status == "FAILED"
    assert result.error["kind"] in ("engine", "runtime")
    assert "illegal" in (result.error["message"] + result.error["traceback"]).lower()
    assert bystander["result"].completed
    time.sleep(0.5)
    retired = [
        e for e in gpu_server.events() if e["event"] == "worker_retired" and e.get("request_id") == result.request_id
    ]
    assert retired and retired[0]["reason"] == "poisoned_context"
    after = gpu_client.execute(single_call(TENSORS, "plus_one", [1]))
    assert after.completed and after.results["out"] == 2


def test_kernel_that_never_ends_times_out_and_the_server_recovers(gpu_client):
    started = time.monotonic()
    with pytest.raises(KCoralError) as raised:
        gpu_client.execute(single_call(SPINS_FOREVER, "spins", []), timeout_seconds=3)
    assert raised.value.status_code == 504 and raised.value.kind == "timeout"
    assert time.monotonic() - started < 10
    after = gpu_client.execute(single_call(HOLDS_THE_GPU, "holds", [0.0]))
    assert after.completed, after.error
