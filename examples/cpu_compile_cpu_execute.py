"""The seed's two-request flow on machines without a GPU.

Request 1 compiles a C++ add_one for the host with tvm_ffi.cpp.build_inline on
a CPU server and returns the shared library's bytes. Request 2 uploads those
bytes as a library (to the same or another CPU server), checks the function
against a Python reference over 1,048,576 float32 values and benchmarks it with
the host timer.

    KCORAL_CPU_URL=http://localhost:8000 KCORAL_EXEC_URL=http://localhost:8000 \\
    python examples/cpu_compile_cpu_execute.py [--save-library add_one.so]
"""

import argparse
import os
import sys
import time

from kcoral import Client, Program

N = 1_048_576

CPP_SOURCE = r"""
void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const int64_t n = x.numel();
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < n; ++i) out[i] = in[i] + 1.0f;
}
"""

OPERATIONS = r"""
from kcoral.builtins import benchmark


def empty(spec):
    import numpy as np

    return np.empty(spec["shape"], dtype=spec["dtype"])


def randn(spec):
    import numpy as np

    rng = np.random.default_rng(spec.get("seed", 0))
    return rng.standard_normal(spec["shape"], dtype=spec["dtype"])


def assert_close(actual, expected):
    import numpy as np

    np.testing.assert_allclose(actual, expected, rtol=1e-2, atol=1e-3)
    return {"ok": True}


def compile_cpp_binary(source, cfg):
    from pathlib import Path

    import tvm_ffi.cpp

    path = tvm_ffi.cpp.build_inline(
        name=f"example_host_{source['name']}",
        cpp_sources=source["source"],
        functions=source["name"],
        extra_cflags=cfg.get("extra_cflags"),
    )
    return Path(path).read_bytes()
"""

REFERENCE = r"""
def main(x):
    return x + 1
"""


def compile_program() -> Program:
    program = Program()
    operations = program.upload(id="operations", kind="module", source=OPERATIONS)
    compile_cpp_binary = program.get_function(
        id="compile_cpp_binary", module=operations, name="compile_cpp_binary", cpu_only=True
    )
    library = program.run(
        id="library",
        fn=compile_cpp_binary,
        args=[{"name": "add_one", "source": CPP_SOURCE}, {"extra_cflags": ["-O3"]}],
    )
    program.return_(key="library", value=library)
    return program


def benchmark_program(library: bytes) -> Program:
    program = Program()
    operations = program.upload(id="operations", kind="module", source=OPERATIONS)
    empty = program.get_function(id="empty", module=operations, name="empty")
    randn = program.get_function(id="randn", module=operations, name="randn")
    assert_close = program.get_function(id="assert_close", module=operations, name="assert_close")
    benchmark = program.get_function(id="benchmark", module=operations, name="benchmark")
    module = program.upload(id="kernel_module", kind="library", value=library)
    kernel = program.get_function(id="kernel", module=module, name="add_one")
    reference_module = program.upload(id="reference_module", kind="module", source=REFERENCE)
    reference = program.get_function(id="reference", module=reference_module, name="main")
    src = program.run(id="src", fn=randn, args=[{"shape": [N], "dtype": "float32", "seed": 0}])
    dst = program.run(id="dst", fn=empty, args=[{"shape": [N], "dtype": "float32"}])
    program.run(id="invoke", fn=kernel, args=[src, dst])
    expected = program.run(id="expected", fn=reference, args=[src])
    check = program.run(id="check", fn=assert_close, args=[dst, expected])
    timing = program.run(id="timing", fn=benchmark, args=[kernel, src, dst, {"warmup_ms": 25, "repeat_ms": 100}])
    program.return_(key="check", value=check)
    program.return_(key="timing", value=timing)
    return program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--save-library", help="also write the compiled library to this file")
    parser.add_argument("--library", help="skip the compile request and upload this library file")
    options = parser.parse_args()
    cpu_url = os.environ.get("KCORAL_CPU_URL", "http://localhost:8000")
    exec_url = os.environ.get("KCORAL_EXEC_URL", cpu_url)

    with Client(cpu_url) as cpu_client, Client(exec_url) as exec_client:
        if options.library:
            with open(options.library, "rb") as f:
                library = f.read()
            compiled_lease_ms = 0.0
        else:
            print(f"[1/2] compiling add_one for the host on {cpu_url} ...", file=sys.stderr, flush=True)
            started = time.monotonic()
            compiled = cpu_client.execute(compile_program(), timeout_seconds=300)
            if not compiled.completed:
                raise SystemExit(f"compile failed: {compiled.error}")
            library = compiled.results["library"]
            if not isinstance(library, bytes):
                raise SystemExit("compile server returned a non-binary library")
            compiled_lease_ms = compiled.lease_held_ms
            print(f"      done in {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
        if options.save_library:
            with open(options.save_library, "wb") as f:
                f.write(library)

        print(f"[2/2] checking and benchmarking on {exec_url} ...", file=sys.stderr, flush=True)
        result = exec_client.execute(benchmark_program(library), timeout_seconds=300)
        if not result.completed:
            raise SystemExit(f"benchmark failed: {result.error}")

    timing = result.results["timing"]
    print(f"compiled {len(library) / 1024:.0f} KiB for the host (x86_64 CPU)")
    print(f"CPU request held a GPU lease for {compiled_lease_ms:.0f} ms")
    print(
        f"execution request held a GPU lease for {result.lease_held_ms:.0f} ms; "
        f"check {'passed' if result.results['check'].get('ok') else 'FAILED'}; "
        f"add_one median {timing['latency_ms_median'] * 1e3:.1f} us "
        f"(p10 {timing['latency_ms_p10'] * 1e3:.1f}, p90 {timing['latency_ms_p90'] * 1e3:.1f}, "
        f"{timing['n_samples']} samples, timer {timing['timer']})"
    )


if __name__ == "__main__":
    main()
