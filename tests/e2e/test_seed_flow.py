"""The seed's flow (seed/remote-compilation.md) for real: nvcc through
tvm_ffi.cpp.build_inline on a CPU server, and the two-request CPU example."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kcoral import Client

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "examples"))

import cpu_compile_gpu_execute as seed  # noqa: E402


def dynamic_symbols(library: Path) -> str:
    return subprocess.run(
        ["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_seed_compile_request_returns_an_add_one_library(make_server, tmp_path, monkeypatch):
    # A private TVM-FFI build cache: nvcc really runs in this test.
    monkeypatch.setenv("TVM_FFI_CACHE_DIR", str(tmp_path / "tvm-ffi-cache"))
    server = make_server("--num-workers", "2")
    with Client(server.url) as client:
        compiled = client.execute(seed.compile_program("sm_90a"), timeout_seconds=300)
    assert compiled.completed, compiled.error
    assert compiled.lease_held_ms == 0
    library = compiled.results["library"]
    assert isinstance(library, bytes)
    assert library[:4] == b"\x7fELF"
    assert int.from_bytes(library[16:18], "little") == 3  # ET_DYN: a shared object
    path = tmp_path / "add_one.so"
    path.write_bytes(library)
    assert re.search(r"\b__tvm_ffi_add_one\b", dynamic_symbols(path))
    # The device code is for the requested architecture.
    if shutil.which("cuobjdump"):
        listing = subprocess.run(["cuobjdump", "--list-elf", str(path)], capture_output=True, text=True).stdout
        assert "sm_90a" in listing


def run_cpu_example(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "examples" / "cpu_compile_cpu_execute.py"), *args],
        env={**__import__("os").environ, "KCORAL_CPU_URL": url},
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cpu_example_runs_end_to_end(make_server):
    server = make_server("--num-workers", "2")
    run = run_cpu_example(server.url)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(r"compiled \d+ KiB for the host \(x86_64 CPU\)", lines[0])
    assert lines[1] == "CPU request held a GPU lease for 0 ms"
    assert re.match(r"execution request held a GPU lease for 0 ms; check passed; add_one median [\d.]+ us", lines[2])
    assert "[1/2] compiling" in run.stderr and "[2/2] checking" in run.stderr


def test_saved_library_runs_on_another_server_instance(make_server, tmp_path):
    compiler = make_server("--num-workers", "1")
    library = tmp_path / "add_one.so"
    first = run_cpu_example(compiler.url, "--save-library", str(library))
    assert first.returncode == 0, first.stderr
    compiler.stop()

    executor = make_server("--num-workers", "1")  # a new instance: nothing cached
    second = run_cpu_example(executor.url, "--library", str(library))
    assert second.returncode == 0, second.stderr
    assert "check passed" in second.stdout
