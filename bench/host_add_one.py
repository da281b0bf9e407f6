"""Host-timer median of the compiled add_one next to plain numpy `x + 1`.

    python bench/host_add_one.py [--url http://127.0.0.1:8000]

Without --url it starts its own CPU server on a free loopback port. Both
callables run in one request, on the same 1,048,576 float32 input, timed by
the same kcoral.builtins.benchmark (host monotonic clock).
"""

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "examples"))
sys.path.insert(0, str(REPO / "bench"))

import cpu_compile_cpu_execute as example  # noqa: E402
from roundtrip import start_server  # noqa: E402

from kcoral import Client, Program  # noqa: E402

NUMPY = r"""
def add_one_numpy(x):
    return x + 1
"""


def compare_program(library: bytes) -> Program:
    program = Program()
    operations = program.upload(id="operations", kind="module", source=example.OPERATIONS)
    randn = program.get_function(id="randn", module=operations, name="randn")
    empty = program.get_function(id="empty", module=operations, name="empty")
    benchmark = program.get_function(id="benchmark", module=operations, name="benchmark")
    library_module = program.upload(id="lib", kind="library", value=library)
    kernel = program.get_function(id="kernel", module=library_module, name="add_one")
    numpy_module = program.upload(id="numpy_module", kind="module", source=NUMPY)
    numpy_add = program.get_function(id="numpy_add", module=numpy_module, name="add_one_numpy")
    src = program.run(id="src", fn=randn, args=[{"shape": [example.N], "dtype": "float32"}])
    dst = program.run(id="dst", fn=empty, args=[{"shape": [example.N], "dtype": "float32"}])
    cfg = {"warmup_ms": 25, "repeat_ms": 300}
    compiled = program.run(id="compiled", fn=benchmark, args=[kernel, src, dst, cfg])
    plain = program.run(id="plain", fn=benchmark, args=[numpy_add, src, cfg])
    program.return_(key="compiled", value=compiled)
    program.return_(key="numpy", value=plain)
    return program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url")
    args = parser.parse_args()
    process = None
    url = args.url
    if url is None:
        process, url = start_server(2)
    try:
        with Client(url) as client:
            compiled = client.execute(example.compile_program(), timeout_seconds=300)
            assert compiled.completed, compiled.error
            result = client.execute(compare_program(compiled.results["library"]), timeout_seconds=300)
            assert result.completed, result.error
    finally:
        if process is not None:
            process.terminate()
            process.wait(30)
    print(f"\nadd-one over {example.N} float32, host timer (kcoral.builtins.benchmark)")
    print(f"{'callable':>22} | {'median us':>9} | {'p10 us':>8} | {'p90 us':>8} | {'samples':>7}")
    print("-" * 66)
    for name, key in (("compiled add_one (C++)", "compiled"), ("numpy x + 1", "numpy")):
        t = result.results[key]
        print(
            f"{name:>22} | {t['latency_ms_median'] * 1e3:>9.1f} | {t['latency_ms_p10'] * 1e3:>8.1f} | "
            f"{t['latency_ms_p90'] * 1e3:>8.1f} | {t['n_samples']:>7}"
        )
    ratio = result.results["numpy"]["latency_ms_median"] / result.results["compiled"]["latency_ms_median"]
    print(f"\nnumpy / compiled median ratio: {ratio:.2f}")


if __name__ == "__main__":
    main()
