"""Why an honest two-stream kernel times 47-71 us when one stream takes 33.5 (issue 23, item 5).

    PYTHONUNBUFFERED=1 python3 bench/multistream_span.py [--calls 50] [--reps 3]
                                                        [--sizes 16,64] [--ncu]

Needs only torch and cupy (no build of KCoral). Each call is timed the way
KCoral's CUPTI timer times it: flush L2 (a 256 MiB memset), synchronize, t0,
fn(*args), t1, synchronize; torch.profiler (CUPTI) gives each kernel's device
start and end and the host time of each launch. Per call it reports

- span: first kernel start to last kernel end (KCoral's sample);
- gap: device idle time between the call's kernels (sum of the positive gaps
  between one kernel's end and the next one's start, in start order);
- host: time from the call's first launch API call to its last;
- busy: the sum of the kernels' durations.

Each case runs ungated and gated. Gated: before t0 a one-thread kernel is
launched on the legacy default stream (torch's current stream) that spins on a
word of pinned mapped host memory until the host sets it (or 20 ms pass, by
%globaltimer); t0 is taken once the kernel reported it has started, and the
word is set once fn has returned. Everything fn queues behind the current
stream (the user's streams wait on it) thus starts only once all its launches
are queued, which is how ncu and CUDA graph replay see the work.

Cases: the same elementwise multiply (torch.mul(x, 2, out=y)) over N float32,
on one stream, and in two halves on two side streams with proper waits; and a
launch-bound case: 10 tiny adds in a Python loop. Each cell of the table is the
median over --calls calls; --reps repetitions, in turn. With --ncu, Nsight
Compute's gpu__time_duration.sum of the same kernels (--clock-control none,
ncu's own cache flush), summed per call, is printed for comparison.

Seen on the H200 (2026-12-03, torch 2.11, `--ncu`, defaults), us:

    case                    mode     span r1     r2     r3    gap   host   busy   ncu sum
    two_streams 64 MiB      ungated    51.89  53.36  54.54  17.68  36.14  35.55
    two_streams 64 MiB      gated      33.90  33.90  34.03   0.00  39.05  45.58     33.06
    one_stream 64 MiB       ungated    33.66  33.62  33.65   0.00   0.00  33.63
    one_stream 64 MiB       gated      33.73  33.71  33.70   0.00   0.00  33.71     31.26
    launch_bound 10x4096    ungated   123.60  96.38  99.39  97.87 109.09   9.09
    launch_bound 10x4096    gated      20.10  20.14  20.29  11.23 108.08   8.96     22.91
    two_streams 256 MiB     ungated   127.74 127.55 127.94   0.00  37.12 139.78
    two_streams 256 MiB     gated     128.14 127.98 128.22   0.00  36.70 140.38    124.83
    one_stream 256 MiB      ungated   127.65 127.55 127.78   0.00   0.00 127.66
    one_stream 256 MiB      gated     127.92 127.82 127.70   0.00   0.00 127.81    125.34

Ungated, the first half starts at once and the second only once Python got
through the stream switch (36 us of host time between the two launches): the
GPU idles 18 us in between, so the span measures the host. At 256 MiB the
first half outlasts that host time, so nothing idles and the gate changes
nothing. Gated, both halves run together (each is slower, busy 45.6, but the
span is one stream's); the ten tiny kernels still leave about 1.1 us between
each other, the GPU's own launch latency. The gate kernel started 5 us or more
before t0 in every gated call (the gate lead).
"""

from __future__ import annotations

import argparse
import ctypes
import csv
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

GATE_SOURCE = r"""
extern "C" __global__ void kc_gate(volatile unsigned int* words, unsigned long long timeout_ns) {
  // words[0]: set by the host to open; words[1]: 1 once running; words[2]: 1 opened, 2 timed out.
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  words[1] = 1;
  __threadfence_system();
  unsigned int outcome = 1;
  while (words[0] == 0) {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > timeout_ns) { outcome = 2; break; }
    __nanosleep(200);
  }
  words[2] = outcome;
  __threadfence_system();
}
"""
GATE_TIMEOUT_NS = 20_000_000
TINY = 4096


class Gate:
    """The launch gate: a spinning kernel on the legacy stream, released by the host."""

    def __init__(self):
        import cupy

        self.cupy = cupy
        self.kernel = cupy.RawKernel(GATE_SOURCE, "kc_gate")
        # cudaHostAllocMapped (2): on a UVA system the host pointer is the device pointer.
        self.ptr = cupy.cuda.runtime.hostAlloc(16, 2)
        self.words = (ctypes.c_uint32 * 4).from_address(self.ptr)
        self.timeouts = 0

    def close(self):
        for i in range(4):
            self.words[i] = 0
        import numpy

        self.kernel(
            (1,), (1,), (numpy.uint64(self.ptr), numpy.uint64(GATE_TIMEOUT_NS)), stream=self.cupy.cuda.Stream.null
        )
        deadline = time.perf_counter() + 1.0
        while self.words[1] == 0:
            if time.perf_counter() > deadline:
                raise RuntimeError("the gate kernel did not start within 1 s")

    def open(self):
        self.words[0] = 1

    def after_drain(self):
        if self.words[2] == 2:
            self.timeouts += 1


def make_cases(n: int):
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()

    def two_streams(x, y):
        cur = torch.cuda.current_stream()
        h = x.numel() // 2
        s1.wait_stream(cur)
        s2.wait_stream(cur)
        with torch.cuda.stream(s1):
            torch.mul(x[:h], 2.0, out=y[:h])
        with torch.cuda.stream(s2):
            torch.mul(x[h:], 2.0, out=y[h:])
        cur.wait_stream(s1)
        cur.wait_stream(s2)

    def one_stream(x, y):
        torch.mul(x, 2.0, out=y)

    a = torch.zeros(TINY, device="cuda")

    def launch_bound(a):
        for _ in range(10):
            torch.add(a, 1.0, out=a)

    mib = n * 4 >> 20
    return [
        (f"two_streams {mib} MiB", two_streams, (x, y), 2),
        (f"one_stream {mib} MiB", one_stream, (x, y), 1),
        ("launch_bound 10x4096", launch_bound, (a,), 10),
    ]


def one_call(fn, args, flush, gate):
    flush.zero_()
    torch.cuda.synchronize()
    if gate is not None:
        gate.close()
    with torch.profiler.record_function("kc_call"):
        fn(*args)
    if gate is not None:
        gate.open()
    torch.cuda.synchronize()
    if gate is not None:
        gate.after_drain()


def profile_calls(fn, args, calls, flush, gate):
    """The chrome trace's events of `calls` profiled calls."""
    for _ in range(5):
        one_call(fn, args, flush, gate)
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(calls):
            one_call(fn, args, flush, gate)
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            trace = json.load(f)
    finally:
        os.unlink(path)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def per_call(events, launches_per_call):
    """One dict per kc_call annotation: span, gap, host, busy (us), and gate_lead."""
    calls = sorted(
        (e for e in events if e.get("ph") == "X" and e.get("name") == "kc_call" and e.get("cat") == "user_annotation"),
        key=lambda e: e["ts"],
    )
    launches = sorted(
        (
            e
            for e in events
            if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver") and "aunch" in e.get("name", "")
        ),
        key=lambda e: e["ts"],
    )
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    by_corr = {}
    for k in kernels:
        by_corr.setdefault(k["args"].get("correlation"), []).append(k)
    gates = sorted((k for k in kernels if "kc_gate" in k["name"]), key=lambda k: k["ts"])
    rows = []
    for c in calls:
        begin, end = c["ts"], c["ts"] + c["dur"]
        # A runtime launch and the driver call under it may share a correlation id: once each.
        mine = list(
            {
                x["args"].get("correlation"): x for x in reversed([x for x in launches if begin <= x["ts"] <= end])
            }.values()
        )
        mine.sort(key=lambda x: x["ts"])
        ks = sorted(
            (k for x in mine for k in by_corr.get(x["args"].get("correlation"), []) if "kc_gate" not in k["name"]),
            key=lambda k: k["ts"],
        )
        if len(ks) != launches_per_call:
            rows.append(None)
            continue
        gap = sum(max(0.0, b["ts"] - (a["ts"] + a["dur"])) for a, b in zip(ks, ks[1:]))
        before = [g for g in gates if g["ts"] < end]
        row = {
            "span": max(k["ts"] + k["dur"] for k in ks) - ks[0]["ts"],
            "gap": gap,
            "host": mine[-1]["ts"] - mine[0]["ts"],
            "busy": sum(k["dur"] for k in ks),
            "first_after_last_launch": ks[0]["ts"] - mine[-1]["ts"],
        }
        if before:
            # > 0: the gate kernel started before t0 on the profiler's clock.
            row["gate_lead"] = begin - before[-1]["ts"]
        rows.append(row)
    return rows


def median(rows, key):
    values = [r[key] for r in rows if r is not None and key in r]
    return statistics.median(values) if values else float("nan")


def run_ncu(args):
    """ncu's gpu__time_duration.sum of the cases' kernels, summed per call (us)."""
    log = tempfile.NamedTemporaryFile(suffix=".csv", delete=False).name
    cmd = [
        "ncu",
        "--metrics",
        "gpu__time_duration.sum",
        "--clock-control",
        "none",
        "--csv",
        "--nvtx",
        "--nvtx-include",
        "kc_measure/",
        "--log-file",
        log,
        sys.executable,
        os.path.abspath(__file__),
        "--ncu-target",
        "--sizes",
        args.sizes,
    ]
    print("$ " + " ".join(cmd))
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
    if done.returncode != 0:
        print(f"ncu failed (rc {done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        return
    text = open(log).read()
    lines = text[text.find('"ID"') :] if '"ID"' in text else text
    rows = [r for r in csv.DictReader(io.StringIO(lines)) if r.get("Metric Name") == "gpu__time_duration.sum"]
    to_us = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3}
    durations = [float(r["Metric Value"].replace(",", "")) * to_us[r.get("Metric Unit", "nsecond")] for r in rows]
    expected = sum(NCU_CALLS * per for _, per in ncu_plan(args.sizes))
    print(f"ncu: {len(durations)} kernels profiled (expected {expected})")
    if len(durations) != expected:
        for r in rows[:40]:
            print("  ", r.get("Kernel Name", "")[:60], r["Metric Value"], r.get("Metric Unit"))
        return
    i = 0
    print(f"{'case':<26}{'ncu sum/call us (median of ' + str(NCU_CALLS) + ')':>34}  per kernel")
    for name, per in ncu_plan(args.sizes):
        sums, kernels = [], []
        for _ in range(NCU_CALLS):
            sums.append(sum(durations[i : i + per]))
            kernels = durations[i : i + per]
            i += per
        print(f"{name:<26}{statistics.median(sums):>34.2f}  " + " ".join(f"{k:.2f}" for k in kernels))


NCU_CALLS = 5


def ncu_plan(sizes):
    """(case, kernels per call), in the order ncu_target runs them."""
    plan = []
    for i, mib in enumerate(int(s) for s in sizes.split(",")):
        plan += [(f"two_streams {mib * 4} MiB", 2), (f"one_stream {mib * 4} MiB", 1)]
        if i == 0:
            plan.append(("launch_bound 10x4096", 10))
    return plan


def ncu_target(args):
    seen = set()
    for mib in (int(s) for s in args.sizes.split(",")):
        for name, fn, fargs, _ in make_cases(mib << 20):
            if name in seen:
                continue
            seen.add(name)
            for _ in range(3):
                fn(*fargs)
            torch.cuda.synchronize()
            for _ in range(NCU_CALLS):
                torch.cuda.nvtx.range_push("kc_measure")
                fn(*fargs)
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sizes", default="16,64", help="Mi float32 elements, comma-separated")
    parser.add_argument("--ncu", action="store_true", help="also run ncu on the same kernels")
    parser.add_argument("--ncu-target", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--show", type=int, default=3, help="per-call rows printed per cell")
    args = parser.parse_args()
    if args.ncu_target:
        ncu_target(args)
        return
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    gate = Gate()
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    cases = []
    seen = set()
    for mib in (int(s) for s in args.sizes.split(",")):
        for case in make_cases(mib << 20):
            if case[0] not in seen:
                seen.add(case[0])
                cases.append(case)
    table = {}
    for rep in range(args.reps):
        for name, fn, fargs, per in cases:
            for mode in ("ungated", "gated"):
                started = time.perf_counter()
                rows = per_call(profile_calls(fn, fargs, args.calls, flush, gate if mode == "gated" else None), per)
                table.setdefault((name, mode), []).append(rows)
                good = [r for r in rows if r is not None]
                print(
                    f"rep {rep} {name} {mode}: {len(good)}/{len(rows)} calls matched, "
                    f"{time.perf_counter() - started:.1f} s"
                )
                for r in good[: args.show] if rep == 0 else []:
                    print(
                        "   span {span:7.2f}  gap {gap:7.2f}  host {host:7.2f}  "
                        "busy {busy:7.2f}  first kernel - last launch "
                        "{first_after_last_launch:7.2f}".format(**r)
                        + (f"  gate lead {r['gate_lead']:.2f}" if "gate_lead" in r else "")
                    )
    print(
        f"\nmedian over {args.calls} calls per cell, us; span per repetition, the rest pooled; "
        f"gate timeouts: {gate.timeouts}"
    )
    print(
        f"{'case':<24}{'mode':<9}{'span r1':>9}{'r2':>9}{'r3':>9}{'gap':>9}{'host':>9}"
        f"{'busy':>9}{'gate lead min':>15}"
    )
    for (name, mode), reps in table.items():
        spans = "".join(f"{median(rows, 'span'):>9.2f}" for rows in reps)
        pooled = [r for rows in reps for r in rows]
        leads = [r["gate_lead"] for r in pooled if r is not None and "gate_lead" in r]
        lead = f"{min(leads):>15.2f}" if leads else f"{'-':>15}"
        print(
            f"{name:<24}{mode:<9}{spans}{median(pooled, 'gap'):>9.2f}"
            f"{median(pooled, 'host'):>9.2f}{median(pooled, 'busy'):>9.2f}{lead}"
        )
    if args.ncu:
        print()
        run_ncu(args)


if __name__ == "__main__":
    main()
