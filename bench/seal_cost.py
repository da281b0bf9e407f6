"""What sealing a benchmark result costs, in one worker-like process (no server).

    python bench/seal_cost.py            # CPU: the host timer's seal; torch is a stand-in if absent
    python bench/seal_cost.py --torch    # GPU machine: real torch, CUDA initialised first, then the
                                         # honest-work drift check (docs/benchmark-integrity.md)

Binds as a GPU worker does at initialize (kcoral._worker.integrity.bind), then prints a table:
the bind, the Python-level facts (snapshot compare of every watched name, the call-chain walk,
the tracing checks; integrity.python.check_us) and a whole host_benchmark of a no-op with
warmup=0, repeat=1 (7 calls, statistics, facts, record, HMAC, result dict). With --torch it
first runs typical honest GPU work and lists any watched name that changed (a false "patched").
"""

import argparse
import statistics
import sys
import time
import types


def stand_in_torch() -> None:
    """torch's shape without torch: ~2,000 module names and a ~700-entry Tensor type dict."""
    fake = types.ModuleType("torch")
    for i in range(2000):
        setattr(fake, f"fn{i}", lambda: None)
    fake.Tensor = type("Tensor", (), {f"m{i}": (lambda self: None) for i in range(700)})
    sys.modules["torch"] = fake
    for name in ("torch.testing", "torch.nn.functional", "torch.cuda"):
        module = types.ModuleType(name)
        for i in range(300):
            setattr(module, f"f{i}", lambda: None)
        sys.modules[name] = module


def drift_check(facts) -> list[tuple[str, str]]:
    """Honest GPU work after the bind; each step with the watched names it changed."""
    import torch
    import torch.nn.functional as F

    x = torch.randn(1 << 20, device="cuda")
    y = torch.empty_like(x)
    a = torch.randn(1024, 1024, device="cuda")

    def events():
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ a
        end.record()
        end.synchronize()
        start.elapsed_time(end)

    def stream():
        with torch.cuda.stream(torch.cuda.Stream()):
            a @ a

    def graph():
        g, static = torch.cuda.CUDAGraph(), torch.zeros_like(x)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            static.add_(1)
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g):
            static.add_(1)
        g.replay()

    def flags():
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    steps = [
        ("elementwise", lambda: (torch.mul(x, 2.0, out=y), F.relu(x), x.sin().sum().item())),
        ("softmax, layer_norm", lambda: (F.softmax(x.view(1024, -1), -1), F.layer_norm(x.view(1024, -1), (1024,)))),
        ("matmul (cuBLAS)", lambda: a @ a),
        (
            "conv2d (cuDNN)",
            lambda: F.conv2d(torch.randn(8, 3, 64, 64, device="cuda"), torch.randn(16, 3, 3, 3, device="cuda")),
        ),
        ("assert_close", lambda: torch.testing.assert_close(y, y)),
        ("CUDA events", events),
        ("side stream", stream),
        ("CUDA graph", graph),
        ("seeds", lambda: (torch.manual_seed(0), torch.cuda.manual_seed_all(0))),
        ("memory stats, empty_cache", lambda: (torch.cuda.max_memory_allocated(), torch.cuda.empty_cache())),
        ("device properties", lambda: (torch.cuda.get_device_properties(0), torch.cuda.get_device_name())),
        ("tf32 flags", flags),
        ("import triton", lambda: __import__("triton")),
        ("torch.compile", lambda: torch.compile(lambda v: v.sin() + 1)(x)),
    ]
    rows = []
    for name, step in steps:
        try:
            step()
            torch.cuda.synchronize()
            changed = ", ".join(facts()["patched"]) or "-"
        except Exception as exc:  # noqa: BLE001 - a missing library is a row, not a crash
            changed = f"(step failed: {type(exc).__name__})"
        rows.append((name, changed))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--torch", action="store_true", help="real torch with CUDA (GPU machine)")
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    from kcoral import _core

    # What a server's start message would say (src/ipc/worker_settings.h), before kcoral.builtins
    # picks its timer by it.
    _core.use_worker_settings(device="gpu" if options.torch else "cpu")
    if options.torch:
        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()
        label = f"torch {torch.__version__}, CUDA initialised"
    else:
        import kcoral.builtins  # noqa: F401 - before the stand-in, which is no torch to bind to

        stand_in_torch()
        label = "torch stand-in (2,000 names, 700-entry Tensor dict)"
    from kcoral._worker import integrity
    from kcoral._worker.engine import Engine

    started = time.perf_counter()
    integrity.bind("gpu" if options.torch else "cpu", Engine._run)
    bind_ms = (time.perf_counter() - started) * 1e3
    watched = sum(len(vars(sys.modules[n])) for n in integrity.WATCHED if n in sys.modules and n != "torch.Tensor")
    watched += len(vars(sys.modules["torch"].Tensor))

    def noop():
        return None

    def facts():
        return _core.host_benchmark(noop, (), 0, 1, 0.0, 0.0)["integrity"]["python"]

    rows = drift_check(facts) if options.torch else []
    for _ in range(100):
        facts()
    check, whole = [], []
    for _ in range(options.calls):
        started = time.perf_counter_ns()
        found = _core.host_benchmark(noop, (), 0, 1, 0.0, 0.0)["integrity"]["python"]
        whole.append((time.perf_counter_ns() - started) / 1e3)
        check.append(found["check_us"])

    def p(values, q):
        ordered = sorted(values)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    print(f"\nseal cost, {label}; {watched} watched names; {options.calls} calls")
    print(f"{'what':<44}{'median':>10}{'p99':>10}")
    print(f"{'bind (once per worker; imports included)':<44}{bind_ms:>8.1f}ms{'':>10}")
    print(f"{'Python facts at seal (check_us)':<44}{statistics.median(check):>9.1f}u{p(check, .99):>9.1f}u")
    print(f"{'host_benchmark no-op, repeat=1, sealed':<44}{statistics.median(whole):>9.1f}u{p(whole, .99):>9.1f}u")
    if rows:
        print("\nwatched names changed by honest work after the bind (false 'patched')")
        print(f"{'step':<28}changed")
        for name, changed in rows:
            print(f"{name:<28}{changed}")


if __name__ == "__main__":
    main()
