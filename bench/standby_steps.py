"""What a stand-by's start and a retirement cost, step by step (issue 25, item 3).

    python bench/standby_steps.py [--gpu 0] [--children 8] [--variants default,eager,...]

Forks children from a parent that imported torch without touching CUDA, as the zygote
does. Each child runs the steps of GpuRuntime.initialize (python/kcoral/_worker/
gpu_runtime.py) one by one and reports how long each took; the parent then retires
them and times each retirement from its request to the reap (the driver destroys the
context while the process exits). --children at once, then one at a time.

Variants (each changes one thing against `default`, the stand-by as the server prepares it):
  default     as GpuRuntime.initialize: CUDA_DEVICE_MAX_CONNECTIONS=1, lazy module loading
  eager       CUDA_MODULE_LOADING=EAGER: every module's kernels loaded with the context
  no_warm_up  without warm_up.device (the common kernels load at first use instead)
  no_timer    without _native.prepare_timer (CUPTI and the L2 flush buffer at first use)
  exit        retired by a normal interpreter exit (torch's and CUDA's at-exit clean-up)
              instead of SIGKILL, the server's way
  os_exit     retired by os._exit(0): no clean-up of ours, the driver's teardown only
Prints one table per variant: the median and max of each step, in milliseconds.
"""

import argparse
import json
import os
import signal
import statistics
import sys
import time

STEPS = ("cuda_init", "first_alloc", "import_tvm_ffi", "import_native", "prepare_timer", "warm_up")
VARIANTS = ("default", "eager", "no_warm_up", "no_timer", "exit", "os_exit")


def child(variant: str, report_fd: int, command_fd: int) -> None:
    import torch

    if variant == "eager":
        os.environ["CUDA_MODULE_LOADING"] = "EAGER"
    times = {}
    mark = time.perf_counter()

    def step(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        times[name] = (now - mark) * 1e3
        mark = now

    torch.cuda.init()
    step("cuda_init")
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    step("first_alloc")
    import tvm_ffi  # noqa: F401

    step("import_tvm_ffi")
    from kcoral import _native
    from kcoral._worker import gpu_benchmark, warm_up

    gpu_benchmark.bind(_native, torch)
    step("import_native")
    if variant != "no_timer":
        _native.prepare_timer()
    step("prepare_timer")
    if variant != "no_warm_up":
        warm_up.device(torch)
    step("warm_up")
    os.write(report_fd, (json.dumps(times) + "\n").encode())
    command = os.read(command_fd, 16).decode().strip()  # "exit", "os_exit" or nothing: killed
    if command == "os_exit":
        os._exit(0)
    sys.exit(0)


def start(variant: str) -> tuple[int, int, int]:
    report_r, report_w = os.pipe()
    command_r, command_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(report_r)
        os.close(command_w)
        try:
            child(variant, report_w, command_r)
        finally:
            os._exit(1)
    os.close(report_w)
    os.close(command_r)
    return pid, report_r, command_w


def read_report(fd: int) -> dict:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            raise SystemExit("a child died before reporting")
        data += chunk
    os.close(fd)
    return json.loads(data)


def retire(variant: str, children: list) -> list[float]:
    """Retires every child at once; ms from the request to each reap."""
    began = time.perf_counter()
    for pid, command_w in children:
        if variant in ("exit", "os_exit"):
            os.write(command_w, variant.encode())
        else:
            os.kill(pid, signal.SIGKILL)  # the server's way (WorkerProcess's destructor)
    out = []
    for pid, command_w in children:
        os.waitpid(pid, 0)
        out.append((time.perf_counter() - began) * 1e3)
        os.close(command_w)
    return out


def batch(variant: str, count: int) -> tuple[list[dict], list[float], float]:
    began = time.perf_counter()
    started = [start(variant) for _ in range(count)]
    reports = [read_report(report_r) for _, report_r, _ in started]
    ready_s = time.perf_counter() - began
    return reports, retire(variant, [(pid, command_w) for pid, _, command_w in started]), ready_s


def describe(values: list[float]) -> str:
    return f"{statistics.median(values):8.1f} {max(values):8.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gpu", default="0", help="CUDA_VISIBLE_DEVICES for the children (default 0)")
    parser.add_argument("--children", type=int, default=8, help="stand-bys prepared at once (default 8)")
    parser.add_argument("--alone", type=int, default=4, help="then this many, one at a time (default 4)")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    os.environ["CUDA_VISIBLE_DEVICES"] = args.gpu
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"  # the server's default (--cuda-max-connections)
    import torch  # noqa: F401 - imported before the forks, CUDA untouched, as in the zygote

    report = {}
    for variant in variants:
        together, retired_together, ready_s = batch(variant, args.children)
        alone, retired_alone = [], []
        for _ in range(args.alone):
            reports, retired, _ = batch(variant, 1)
            alone += reports
            retired_alone += retired
        report[variant] = {
            "together": together,
            "retired_together_ms": retired_together,
            "ready_together_s": ready_s,
            "alone": alone,
            "retired_alone_ms": retired_alone,
        }
        print(f"\n{variant}: {args.children} at once (all ready in {ready_s:.2f} s), then {args.alone} alone")
        print(f"{'step (ms)':18} {'together p50':>12} {'max':>8} {'alone p50':>12} {'max':>8}")
        for name in STEPS:
            print(f"{name:18} {describe([r[name] for r in together]):>21} {describe([r[name] for r in alone]):>21}")
        print(
            f"{'total':18} {describe([sum(r.values()) for r in together]):>21} "
            f"{describe([sum(r.values()) for r in alone]):>21}"
        )
        print(f"{'retirement':18} {describe(retired_together):>21} {describe(retired_alone):>21}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
