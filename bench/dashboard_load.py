"""What 64 live dashboard viewers cost a server (issue 28).

    python bench/dashboard_load.py [--viewers 64] [--seconds 60] [--rounds 6] [--requests 100]

Starts its own CPU server on a free loopback port and, in one run:
  1. measures the server process's CPU (utime + stime from /proc/<pid>/stat, all its threads;
     its workers are other processes) for --seconds with nobody polling, then for --seconds with
     --viewers httpx clients each polling GET /api/status once a second (spread over the second);
  2. times a trivial program (--requests, one after another) in --rounds rounds that take turns
     without and with the viewers polling, so load from elsewhere on the machine reaches both
     alike, and compares the pooled p50 and p99.
Prints a table; exits 1 unless the viewers' CPU stays under 1% of one core and the p50 and p99
with viewers are within 5% of those without.
"""

from __future__ import annotations

import argparse
import asyncio
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

CPU_LIMIT = 0.01  # of one core
LATENCY_LIMIT = 0.05  # relative


def trivial_program() -> Program:
    program = Program()
    module = program.upload(kind="module", source="def f(x):\n    return x + 1\n")
    program.return_(key="out", value=program.run(fn=program.get_function(module=module, name="f"), args=[1]))
    return program


def start_server() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log_dir = tempfile.mkdtemp(prefix="kcoral-bench-dashboard-")
    process = subprocess.Popen(
        [sys.executable, "-m", "kcoral", "server", "--port", str(port), "--log-dir", log_dir,
         "--num-workers", "2", "--max-requests-per-worker", "0"],  # fmt: skip
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    stop_server(process)
    raise SystemExit("server did not start")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Viewers:
    """`count` httpx clients polling /api/status once a second while `on` is set; a thread."""

    def __init__(self, url: str, count: int):
        self.url, self.count = url, count
        self.on = threading.Event()
        self.done = threading.Event()
        self.polls = 0
        self.failures = 0
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self.thread.start()

    async def _one(self, offset: float) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.sleep(offset)
            while not self.done.is_set():
                if not self.on.is_set():
                    await asyncio.sleep(0.05)
                    continue
                started = time.monotonic()
                try:
                    response = await client.get(self.url + "/api/status")
                    response.json()  # a viewer reads what it fetched
                    self.polls += 1
                    self.failures += response.status_code != 200
                except httpx.HTTPError:
                    self.failures += 1
                await asyncio.sleep(max(0.0, 1.0 - (time.monotonic() - started)))

    async def _run(self) -> None:
        await asyncio.gather(*(self._one(k / self.count) for k in range(self.count)))

    def close(self) -> None:
        self.done.set()
        self.thread.join(30)


def snapshot_builds(url: str) -> int:
    return httpx.get(url + "/api/status", timeout=10).json()["snapshot_builds"]


def server_cpu(pid: int, seconds: float) -> float:
    before, started = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - before) / (time.monotonic() - started)


def timed_requests(client: Client, n: int) -> list[float]:
    times = []
    program = trivial_program()
    for _ in range(n):
        started = time.perf_counter()
        assert client.execute(program).completed
        times.append((time.perf_counter() - started) * 1000)
    return times


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--viewers", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=100, help="trivial requests per round and phase")
    args = parser.parse_args()

    process, url = start_server()
    viewers = Viewers(url, args.viewers)
    try:
        with Client(url) as client:
            timed_requests(client, 20)  # warm: workers started, connections open
            idle_cpu = server_cpu(process.pid, args.seconds)
            builds_before, polls_before = snapshot_builds(url), viewers.polls
            viewers.on.set()
            time.sleep(2)  # every viewer has started polling
            viewed_started = time.monotonic()
            viewed_cpu = server_cpu(process.pid, args.seconds)
            viewed_seconds = time.monotonic() - viewed_started + 2
            builds = snapshot_builds(url) - builds_before
            polls = viewers.polls - polls_before
            viewers.on.clear()
            time.sleep(1.5)

            without, with_viewers = [], []
            for _ in range(args.rounds):
                without += timed_requests(client, args.requests)
                viewers.on.set()
                time.sleep(1.2)
                with_viewers += timed_requests(client, args.requests)
                viewers.on.clear()
                time.sleep(1.2)
    finally:
        viewers.close()
        stop_server(process)

    p50 = (quantile(without, 0.5), quantile(with_viewers, 0.5))
    p99 = (quantile(without, 0.99), quantile(with_viewers, 0.99))
    cpu_ok = viewed_cpu < CPU_LIMIT
    p50_ok = p50[1] <= p50[0] * (1 + LATENCY_LIMIT)
    p99_ok = p99[1] <= p99[0] * (1 + LATENCY_LIMIT)
    verdict = lambda ok: "pass" if ok else "FAIL"  # noqa: E731
    print(f"dashboard load: {args.viewers} viewers polling /api/status once a second, {args.seconds:.0f} s")
    print(f"{'measure':<44}{'no viewers':>14}{'viewers':>14}{'limit':>12}{'':>6}")
    print(f"{'server CPU, % of one core':<44}{idle_cpu:>13.2%} {viewed_cpu:>13.2%} {'< 1%':>11}  {verdict(cpu_ok)}")
    print(f"{'polls answered (failures)':<44}{'-':>14}{f'{polls} ({viewers.failures})':>14}")
    print(f"{'snapshots built (per second)':<44}{'-':>14}{f'{builds} ({builds / viewed_seconds:.2f})':>14}{'<= 1/s':>12}")
    n = f"{len(without)} / {len(with_viewers)}"
    print(f"{'trivial request p50, ms (' + n + ')':<44}{p50[0]:>14.2f}{p50[1]:>14.2f}{'+5%':>12}  {verdict(p50_ok)}")
    print(f"{'trivial request p99, ms':<44}{p99[0]:>14.2f}{p99[1]:>14.2f}{'+5%':>12}  {verdict(p99_ok)}")
    return 0 if cpu_ok and p50_ok and p99_ok and viewers.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
