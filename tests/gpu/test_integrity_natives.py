"""Issue 9's natives on the GPU machine (opt-in, like every test here): check_close on CUDA
tensors, NVML snapshots from inside a (sandboxed) GPU worker, and the helper-process scan
finding a helper that holds the GPU. Written without a GPU at hand: the first run on the H200
is their first run.
"""

from __future__ import annotations

from conftest import servers

CHECKS_CUDA_TENSORS = r"""
import torch
from kcoral.builtins import assert_close, check_close

def main():
    y = torch.randn(1 << 20, device="cuda")
    passed = check_close(y, y.cpu())            # a CPU reference against a CUDA output
    z = y.clone()
    z[12345] += 1
    failed = check_close(z, y)
    try:
        assert_close(z, y)
        raised = None
    except Exception as error:
        raised = [getattr(error, "kind", None), str(error)]
    try:
        check_close(y.view(1024, 1024).t(), y.view(1024, 1024).t().contiguous())
        strided = None
    except Exception as error:
        strided = [getattr(error, "kind", None), str(error)]
    b = y.to(torch.bfloat16)
    return {"passed": passed, "failed": failed, "raised": raised, "strided": strided,
            "bf16": check_close(b, b.clone())["passed"]}
"""

READS_CLOCKS = r"""
import torch

def main():
    from kcoral import _native
    torch.cuda.synchronize()
    start = _native.gpu_snapshot()
    torch.randn(1 << 24, device="cuda").sum().item()
    end = _native.gpu_snapshot()
    return {"start": start.as_dict(), "end": end.as_dict(), "flags": _native.clock_flags(start, end)}
"""

STARTS_A_GPU_HELPER = r"""
import subprocess, sys

HELPER = "import time, torch; torch.empty(1, device='cuda'); print('ready', flush=True); time.sleep(60)"

def main():
    from kcoral import _native
    helper = subprocess.Popen([sys.executable, "-c", HELPER], stdout=subprocess.PIPE, text=True)
    try:
        ready = helper.stdout.readline().strip()
        return {"ready": ready, "helper": helper.pid, "scan": _native.scan_processes()}
    finally:
        helper.kill()
        helper.wait()
"""


def test_check_close_on_cuda_tensors(gpu_client):
    result = gpu_client.execute(servers.call(CHECKS_CUDA_TENSORS), timeout_seconds=120)
    assert result.completed, (result.error, result.stderr)
    out = result.results["out"]
    assert out["passed"]["passed"] is True and out["passed"]["total"] == 1 << 20
    assert out["failed"]["mismatched"] == 1 and out["failed"]["first_mismatch"] == [12345]
    assert out["raised"][0] == "correctness" and "1 of 1048576 elements differ" in out["raised"][1]
    assert out["strided"][0] == "runtime" and "non-contiguous CUDA tensor" in out["strided"][1]
    assert out["bf16"] is True


def test_gpu_snapshot_inside_a_worker(gpu_client):
    result = gpu_client.execute(servers.call(READS_CLOCKS), timeout_seconds=120)
    assert result.completed, (result.error, result.stderr)
    out = result.results["out"]
    for snapshot in (out["start"], out["end"]):
        assert snapshot["uuid"].startswith("GPU-"), snapshot
        assert snapshot["name"], snapshot
        assert snapshot["driver_version"], snapshot
        assert snapshot["sm_mhz"] and snapshot["mem_mhz"], snapshot
        assert snapshot["max_sm_mhz"] >= snapshot["sm_mhz"], snapshot
        assert isinstance(snapshot["throttle_reasons"], list), snapshot
        assert snapshot["temp_c"] and snapshot["power_w"], snapshot
    assert isinstance(out["flags"], list)
    print("snapshot:", out["end"], "flags:", out["flags"])  # the H200 figures, for the report


def test_helper_process_holding_the_gpu_is_found(gpu_client):
    result = gpu_client.execute(servers.call(STARTS_A_GPU_HELPER), timeout_seconds=120)
    assert result.completed, (result.error, result.stderr)
    out = result.results["out"]
    assert out["ready"] == "ready"
    scan = out["scan"]
    if not scan["meaningful"]:
        import pytest

        pytest.skip(f"the GPU server is not sandboxed: {scan['reason_if_not']}")
    helper = {p["pid"]: p for p in scan["processes"]}[out["helper"]]
    assert helper["holds_gpu"] is True, helper
