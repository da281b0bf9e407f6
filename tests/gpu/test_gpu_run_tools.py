"""`kcoral run` on the GPU server (spec/benchmark.md §3.6): nvidia-smi through
`shell`, Nsight Compute reports through `ncu`, and a planted out-of-bounds
write found by `compute-sanitizer`. The CUDA programs are compiled here with
nvcc and sent with --send; the CLI runs as a subprocess, as a user runs it.

Opt-in like every GPU test: without a GPU the `gpu_server` fixture skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ADD_ONE_CU = r"""
#include <cstdio>
__global__ void add_one(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}
int main() {
  const int n = 1 << 20;
  float* x = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess) return 2;
  cudaMemset(x, 0, n * sizeof(float));
  add_one<<<(n + 255) / 256, 256>>>(x, n);
  cudaError_t status = cudaDeviceSynchronize();
  printf("add_one: %s\n", cudaGetErrorString(status));
  cudaFree(x);
  return status == cudaSuccess ? 0 : 1;
}
"""

# n ints are allocated and every thread writes at n + i: all 32 writes are out
# of bounds, but inside the allocation's granularity, so only memcheck sees them.
OUT_OF_BOUNDS_CU = r"""
#include <cstdio>
__global__ void write_past_the_end(int* p, int n) { p[n + threadIdx.x] = threadIdx.x; }
int main() {
  const int n = 32;
  int* p = nullptr;
  if (cudaMalloc(&p, n * sizeof(int)) != cudaSuccess) return 2;
  write_past_the_end<<<1, 32>>>(p, n);
  cudaError_t status = cudaDeviceSynchronize();
  printf("sync: %s\n", cudaGetErrorString(status));
  cudaFree(p);
  return 0;
}
"""

TORCH_SCRIPT = """\
import torch
x = torch.ones(1 << 20, device="cuda")
y = x * 2
torch.cuda.synchronize()
print("sum", float(y.sum()))
"""


def cuda_tool(name: str) -> str | None:
    """`name` on PATH, else in the CUDA toolkit's bin."""
    found = shutil.which(name)
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and os.access(os.path.join(home, "bin", name), os.X_OK):
            return os.path.join(home, "bin", name)
    return None


def kcoral_run(server, tool: str, *args: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "kcoral", "run", tool, "--url", server.url, *args]
    run = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    print(f"$ {' '.join(command)}\n[rc {run.returncode}]\n{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
    return run


def describe(run: subprocess.CompletedProcess) -> str:
    return f"rc {run.returncode}\nstdout:\n{run.stdout[-3000:]}\nstderr:\n{run.stderr[-3000:]}"


@pytest.fixture(scope="module")
def binaries(gpu_server, tmp_path_factory):
    """add_one and out_of_bounds, compiled here (the GPU server's machine)."""
    nvcc = cuda_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    directory = tmp_path_factory.mktemp("cuda-binaries")
    for name, source in (("add_one", ADD_ONE_CU), ("out_of_bounds", OUT_OF_BOUNDS_CU)):
        (directory / f"{name}.cu").write_text(source)
        build = subprocess.run(
            [nvcc, "-lineinfo", "-o", str(directory / name), str(directory / f"{name}.cu")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert build.returncode == 0, build.stderr[-3000:]
    return directory


def test_shell_nvidia_smi_sees_the_gpu(gpu_server, tmp_path):
    run = kcoral_run(gpu_server, "shell", "--", "nvidia-smi", "-L", cwd=tmp_path)
    assert run.returncode == 0, describe(run)
    assert "GPU 0:" in run.stdout, describe(run)


def test_shell_builds_with_nvcc_remotely_and_fetches_the_binary(gpu_server, tmp_path):
    source = tmp_path / "add_one.cu"
    source.write_text(ADD_ONE_CU)
    out = tmp_path / "build"
    run = kcoral_run(
        gpu_server,
        "shell",
        "--send",
        str(source),
        "--out",
        str(out),
        "--fetch",
        "add_one",
        "--",
        "bash",
        "-c",
        "nvcc -o add_one add_one.cu && ./add_one",
        cwd=tmp_path,
    )
    assert run.returncode == 0, describe(run)
    assert "add_one: no error" in run.stdout, describe(run)
    assert (out / "add_one").stat().st_size > 0


def _check_report(out: Path, kernel: str | None) -> None:
    report = out / "capture.ncu-rep"
    assert report.is_file() and report.stat().st_size > 0
    ncu = cuda_tool("ncu")
    imported = subprocess.run(
        [ncu, "--import", str(report), "--csv", "--page", "raw"], capture_output=True, text=True, timeout=120
    )
    assert imported.returncode == 0, imported.stderr[-3000:]
    assert "Kernel Name" in imported.stdout, imported.stdout[-3000:]
    if kernel is not None:
        assert kernel in imported.stdout, imported.stdout[-3000:]


def test_ncu_profiles_a_cuda_binary(gpu_server, binaries, tmp_path):
    if cuda_tool("ncu") is None:
        pytest.skip("ncu is not installed")
    out = tmp_path / "prof"
    run = kcoral_run(
        gpu_server,
        "ncu",
        "--send",
        str(binaries / "add_one"),
        "--out",
        str(out),
        "--timeout",
        "110",
        "--",
        "--launch-count",
        "1",
        "-k",
        "regex:add_one",
        "--",
        "./add_one",
        cwd=tmp_path,
    )
    assert run.returncode == 0, describe(run)
    assert f"kcoral: saved artifacts to {out}" in run.stderr
    _check_report(out, "add_one")


def test_ncu_profiles_a_torch_script(gpu_server, tmp_path):
    if cuda_tool("ncu") is None:
        pytest.skip("ncu is not installed")
    script = tmp_path / "script.py"
    script.write_text(TORCH_SCRIPT)
    out = tmp_path / "prof"
    run = kcoral_run(
        gpu_server,
        "ncu",
        "--send",
        str(script),
        "--out",
        str(out),
        "--timeout",
        "115",
        "--",
        "--launch-count",
        "1",
        "--",
        "python",
        "script.py",
        cwd=tmp_path,
    )
    assert run.returncode == 0, describe(run)
    assert "sum 2097152.0" in run.stdout, describe(run)
    _check_report(out, None)


def test_compute_sanitizer_reports_the_planted_out_of_bounds_write(gpu_server, binaries, tmp_path):
    if cuda_tool("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not installed")
    out = tmp_path / "sanitizer"
    run = kcoral_run(
        gpu_server,
        "compute-sanitizer",
        "--send",
        str(binaries / "out_of_bounds"),
        "--out",
        str(out),
        "--fetch",
        "log.txt",
        "--timeout",
        "110",
        "--",
        "--error-exitcode",
        "1",
        "--log-file",
        "log.txt",
        "./out_of_bounds",
        cwd=tmp_path,
    )
    assert run.returncode == 1, describe(run)
    log = (out / "log.txt").read_text()
    assert "Invalid __global__ write of size 4" in log, log[-3000:]
    assert "write_past_the_end" in log, log[-3000:]


def test_compute_sanitizer_passes_a_clean_binary(gpu_server, binaries, tmp_path):
    if cuda_tool("compute-sanitizer") is None:
        pytest.skip("compute-sanitizer is not installed")
    run = kcoral_run(
        gpu_server,
        "compute-sanitizer",
        "--send",
        str(binaries / "add_one"),
        "--timeout",
        "110",
        "--",
        "--error-exitcode",
        "1",
        "./add_one",
        cwd=tmp_path,
    )
    assert run.returncode == 0, describe(run)
    assert "ERROR SUMMARY: 0 errors" in run.stdout + run.stderr, describe(run)
