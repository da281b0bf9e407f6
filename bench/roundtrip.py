"""Round trip and throughput of a trivial program against a local server.

    python bench/roundtrip.py [--requests 400] [--rounds 3] [--workers 8] [--device cpu|gpu]
                              [--max-requests-per-worker 1|0] [--sandbox both|namespaces|none]

Starts its own servers on free loopback ports (by default two: with the
worker sandbox and without, side by side, each idle while the other is
measured), measures, stops them, and prints a table: p50/p99 latency and
requests/s at concurrency 1 and 32 (--concurrency), the sandbox's cost as a ratio, and the
seed's compile request (nvcc through tvm_ffi.cpp.build_inline), cold and
repeated. The servers take turns, `--rounds` times, and each row is the
median round: on a shared machine, load from elsewhere then reaches both
alike instead of whichever ran when it came.
"""

import argparse
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

from kcoral import Client, Program

REPO = Path(__file__).resolve().parents[1]


def trivial_program() -> Program:
    program = Program()
    module = program.upload(kind="module", source="def f(x):\n    return x + 1\n")
    f = program.get_function(module=module, name="f")
    out = program.run(fn=f, args=[1])
    program.return_(key="out", value=out)
    return program


def start_server(
    workers: int, device: str = "cpu", requests_per_worker: int = 1, sandbox: str = "namespaces"
) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_dir = tempfile.mkdtemp(prefix="kcoral-bench-")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kcoral",
            "server",
            "--port",
            str(port),
            "--log-dir",
            log_dir,
            "--no-log-console",
            "--max-requests-per-worker",
            str(requests_per_worker),
            "--sandbox",
            sandbox,
            "--build-cache-dir",
            tempfile.mkdtemp(prefix="kcoral-bench-builds-"),  # a cold first compile
            *(
                ["--device", "cpu", "--num-workers", str(workers)]
                if device == "cpu"
                else ["--device", "gpu", "--gpus", "0", "--workers-per-gpu", str(workers)]
            ),
        ],
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(2400):
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    process.kill()
    raise SystemExit("server did not start")


def run_concurrent(url: str, concurrency: int, total: int) -> tuple[list[float], float]:
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(total))

    def worker():
        with Client(url) as client:
            program = trivial_program()
            while True:
                with lock:
                    if next(counter, None) is None:
                        return
                start = time.perf_counter()
                result = client.execute(program)
                elapsed = time.perf_counter() - start
                assert result.completed, result.error
                with lock:
                    latencies.append(elapsed * 1e3)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, total / (time.perf_counter() - start)


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> tuple[float, float]:
    """(its own, its reaped children's) CPU time of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS


def zygote_of(server: subprocess.Popen) -> int | None:
    for child in subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True, text=True).stdout.split():
        with contextlib.suppress(OSError), open(f"/proc/{child}/cmdline") as f:
            if "zygote" in f.read():
                return int(child)
    return None


def cpu_per_request(server: subprocess.Popen, run) -> tuple[object, dict[str, float]]:
    """run()'s value, and the CPU it cost per request in ms: the server, the zygote, the workers
    (the zygote's reaped children) and this client (both counted while `run` ran)."""
    zygote = zygote_of(server)
    before = cpu_seconds(server.pid)[0], cpu_seconds(zygote) if zygote else (0.0, 0.0), os.times()
    value = run()
    after = cpu_seconds(server.pid)[0], cpu_seconds(zygote) if zygote else (0.0, 0.0), os.times()
    me = lambda t: t.user + t.system  # noqa: E731
    spent = {
        "server": after[0] - before[0],
        "zygote": after[1][0] - before[1][0],
        "workers": after[1][1] - before[1][1],
        "client": me(after[2]) - me(before[2]),
    }
    spent["total"] = sum(spent.values())
    return value, spent


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=400, help="requests per row and round")
    parser.add_argument("--rounds", type=int, default=3, help="turns each server takes (median reported)")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument(
        "--max-requests-per-worker",
        type=int,
        default=1,
        help="1 (the default): a fresh worker process per request; 0: reuse workers",
    )
    parser.add_argument(
        "--sandbox",
        choices=["both", "namespaces", "none"],
        default="both",
        help="both (the default): one server with the worker sandbox, one without, in one run",
    )
    parser.add_argument(
        "--concurrency",
        default="1,32",
        help="comma-separated client concurrencies, one row each (CPU cost is taken at the last)",
    )
    args = parser.parse_args()
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    # A private TVM-FFI build cache, so the compile request really runs nvcc.
    os.environ["TVM_FFI_CACHE_DIR"] = tempfile.mkdtemp(prefix="kcoral-bench-tvm-ffi-")
    sys.path.insert(0, str(REPO / "examples"))
    import cpu_compile_gpu_execute as seed

    modes = ["namespaces", "none"] if args.sandbox == "both" else [args.sandbox]
    servers = {mode: start_server(args.workers, args.device, args.max_requests_per_worker, mode) for mode in modes}
    rows, compiles = [], {}
    try:
        rounds: dict[tuple[str, int], list[tuple[float, float, float]]] = {}
        for url in (url for _, url in servers.values()):
            run_concurrent(url, 4, 40)  # warm-up
        cpu: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for concurrency in concurrencies:
                for mode, (process, url) in servers.items():
                    (latencies, rate), spent = cpu_per_request(
                        process, lambda: run_concurrent(url, concurrency, args.requests)
                    )
                    rounds.setdefault((mode, concurrency), []).append(
                        (rate, statistics.median(latencies), percentile(latencies, 99))
                    )
                    if concurrency == concurrencies[-1]:
                        cpu.setdefault(mode, []).append({k: v / args.requests * 1e3 for k, v in spent.items()})
        for (mode, concurrency), measured in rounds.items():
            rate, p50, p99 = sorted(measured)[len(measured) // 2]  # the median round, by rate
            rows.append((mode, concurrency, p50, p99, rate))
        rows.sort(key=lambda row: (modes.index(row[0]), row[1]))
        for mode, (_, url) in servers.items():
            compiles[mode] = []
            try:
                with Client(url) as client:
                    for _ in range(2):  # cold, then the identical request again
                        start = time.perf_counter()
                        compiled = client.execute(seed.compile_program("sm_90a"), timeout_seconds=300)
                        if compiled.completed:
                            compiles[mode].append(time.perf_counter() - start)
            except Exception as exc:  # noqa: BLE001 - report, don't hide the table
                print(f"compile request failed: {exc}", file=sys.stderr)
    finally:
        for process, _ in servers.values():
            process.send_signal(signal.SIGTERM)
        for process, _ in servers.values():
            process.wait(30)

    print(
        f"\nKCoral {args.device.upper()} server, {args.workers} workers, {os.cpu_count()} cores, "
        f"{args.requests} requests per row, median of {args.rounds} rounds, --max-requests-per-worker {args.max_requests_per_worker}"
    )
    print(f"{'sandbox':>10} | {'concurrency':>11} | {'p50 ms':>8} | {'p99 ms':>8} | {'requests/s':>10}")
    print("-" * 60)
    for mode, concurrency, p50, p99, rate in rows:
        print(f"{mode:>10} | {concurrency:>11} | {p50:>8.2f} | {p99:>8.2f} | {rate:>10.1f}")
    if len(modes) == 2:
        for concurrency in concurrencies:
            on, off = (r[4] for r in rows if r[1] == concurrency)
            print(f"requests/s with the sandbox / without, concurrency {concurrency}: {on / off:.2f}")
    print(
        f"\nCPU per request at concurrency {concurrencies[-1]}, ms (median of rounds; workers: the zygote's reaped children)"
    )
    parts = ["server", "zygote", "workers", "client", "total"]
    print(f"{'sandbox':>10} | " + " | ".join(f"{p:>8}" for p in parts))
    for mode, measured in cpu.items():
        print(f"{mode:>10} | " + " | ".join(f"{statistics.median(m[p] for m in measured):>8.2f}" for p in parts))
    for mode, times in compiles.items():
        if times:
            print(
                f"seed compile request (nvcc, sm_90a), sandbox {mode}: "
                + ", then ".join(f"{t:.2f} s" for t in times)
                + " (cold, then repeated)"
            )


if __name__ == "__main__":
    main()
