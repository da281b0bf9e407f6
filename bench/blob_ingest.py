"""Upload throughput: blobs from a client to user code, ours and the reference's.

    python bench/blob_ingest.py [--sizes 1,64,256,1024] [--rounds 3] [--reference PYTHON]
                                [--device cpu|gpu] [--reuse-workers]

Starts its own servers on free loopback ports (ours, and the reference
kcoral==0.1.1 when --reference names a Python that has it, by default
build/reference-server-venv/bin/python if present), each with two workers and
room for a 1 GiB request, and uploads `bytes` values of each size to a
program that returns their length:

- cold: fresh random bytes each round, so nothing is cached or remembered;
- warm: the same bytes object again, already on the server.

End to end is the client's wall time from building the program to its
result (hashing included: that is where a client spends it). Server time is
ours `total_ms` of each request (from its header to its reply, so including
the upload), and for the reference the time from its `request_received`
event to its `request_finished` (after it has read the body, which flatters
it). "ours program" is the program's own request, after the blob was sent
ahead, and "ours upload instruction" the worker's instruction that makes the
value (for a GPU tensor, the copy to the device); "ours client CPU" is the
client process's user and system time over the upload. MB/s is 10^6 bytes
per second of end-to-end time; each cell is the median of --rounds rounds
(each round is printed on stderr). The servers take turns, size by size, and
are started afresh for each size; timing starts once the machine is idle. A
cold upload writes its blob into new memory, whose cost on a VM varies
(docs/data-path.md, "What it costs").

With --device gpu (the H200 machine) it instead uploads a float32 tensor to
a torch CUDA tensor, checks it on the GPU, and returns a checksum.

It also prints our server's peak RSS (VmHWM) after the largest upload.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import NamedTuple

import httpx

REPO = Path(__file__).resolve().parents[1]
DEFAULT_REFERENCE = REPO / "build" / "reference-server-venv" / "bin" / "python"
MIB = 1 << 20
LIMIT = str(2 << 30)
# Room for a 1 GiB blob (a quarter of the tier), no more: with the default
# 16 GiB, two servers fill a 24 GiB machine and both slow down.
CACHE_BYTES = 4 << 30

LENGTH = "def main(data):\n    return len(data)\n"
# The tensor arrives on the GPU; its checksum is computed there.
CHECKSUM = (
    "import torch\n"
    "def main(t):\n"
    "    assert t.is_cuda\n"
    "    return [t.numel(), float(t.double().sum().item())]\n"
)

# Runs in the client's own interpreter (ours, or the reference's venv): one
# upload per line on stdin, "<size> <cold|warm> <bytes|tensor>", one JSON line out.
CLIENT = r"""
import json, os, resource, sys, time
import numpy as np
from kcoral import Client, Program
url, source = sys.argv[1], sys.argv[2]
client = Client(url)
kept = {}
for line in sys.stdin:
    size, state, kind = line.split()
    size = int(size)
    if state == "cold" or size not in kept:
        kept.clear()
        # Fast to make and fresh each time: 16 random bytes repeated (as float32
        # for a tensor, in [0, 1) so that its sum is finite).
        seed = np.random.default_rng().random(4, dtype=np.float32).tobytes() if kind == "tensor" else os.urandom(16)
        kept[size] = bytes(bytearray(seed) * (size // 16))
    data = kept[size]
    start, cpu_start = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    program = Program()
    if kind == "tensor":
        value = program.upload(kind="tensor", value=data, dtype="float32", shape=[size // 4])
    else:
        value = program.upload(kind="bytes", value=data)
    module = program.upload(kind="module", source=source)
    fn = program.get_function(module=module, name="main")
    program.return_(key="out", value=program.run(fn=fn, args=[value]))
    result = client.execute(program)
    elapsed, cpu_end = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu = cpu_end.ru_utime + cpu_end.ru_stime - cpu_start.ru_utime - cpu_start.ru_stime
    assert result.completed, result.error
    out = result.results["out"]
    if kind == "tensor":
        expected = float(np.frombuffer(data, dtype=np.float32).astype(np.float64).sum())
        assert out[0] == size // 4 and abs(out[1] - expected) <= 1e-6 * max(1.0, abs(expected)), (out, expected)
    else:
        assert out == size, out
    print(json.dumps({"seconds": elapsed, "cpu": cpu}), flush=True)
"""


class Timing(NamedTuple):
    """One upload, in seconds; program and first_instruction are ours only (NaN otherwise)."""

    wall: float
    server: float
    program: float  # the program's own request, the blob already in
    first_instruction: float  # the worker's instruction that makes the value
    client_cpu: float


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Side:
    """One server and a client process that talks to it."""

    def __init__(self, name: str, python: str, device: str, source: str, reuse: bool):
        self.name = name
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"kcoral-ingest-{name}-"))
        flags = [
            "--device",
            device,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-dir",
            str(self.log_dir),
            "--no-log-console",
            "--max-request-bytes",
            LIMIT,
            "--cache-capacity-bytes",
            str(CACHE_BYTES),
        ]
        # Two seats: a fresh worker is ready while the last one's replacement starts.
        flags += ["--num-workers", "2"] if device == "cpu" else ["--gpus", "0", "--workers-per-gpu", "2"]
        if name == "reference":
            flags += ["--sandbox", "none"]  # bubblewrap is not installed on these machines
        if reuse:
            flags += ["--max-requests-per-worker", "0"]
        self.server = subprocess.Popen(
            [python, "-m", "kcoral", "server", *flags],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"{name} server did not start")
            time.sleep(0.1)
        env = dict(os.environ)
        if name == "reference":
            env.pop("PYTHONPATH", None)
        self.client = subprocess.Popen(
            [python, "-c", CLIENT, self.url, source], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
        )

    def upload(self, size: int, state: str, kind: str) -> Timing:
        seen = len(self.events())
        self.client.stdin.write(f"{size} {state} {kind}\n")
        self.client.stdin.flush()
        line = self.client.stdout.readline()
        if not line:
            raise SystemExit(f"{self.name} client failed")
        reply = json.loads(line)
        time.sleep(0.05)  # the log line of the reply follows it
        events = self.events()[seen:]
        return Timing(reply["seconds"], self.server_seconds(events), *self.program_seconds(events), reply["cpu"])

    def program_seconds(self, events: list[dict]) -> tuple[float, float]:
        """Ours: the program's request (the blob already in), and its first
        instruction in the worker (the upload that becomes the value)."""
        if self.name != "ours":
            return float("nan"), float("nan")
        program = sum(e["total_ms"] for e in events if e["event"] == "request_finished") / 1e3
        first = [e["instructions"][0][1] for e in events if e["event"] == "run_timeline" and e["instructions"]]
        return program, (first[0] / 1e3 if first else float("nan"))

    def events(self) -> list[dict]:
        lines = []
        for path in self.log_dir.glob("runs/*/events.jsonl"):
            lines += [json.loads(x) for x in path.read_text().splitlines() if x]
        return lines

    def server_seconds(self, events: list[dict]) -> float:
        if self.name == "ours":
            return sum(e["total_ms"] for e in events if e["event"] in ("request_finished", "blob_received")) / 1e3
        received = {e["request_id"]: e["timestamp"] for e in events if e["event"] == "request_received"}
        total = 0.0
        for e in events:
            if e["event"] == "request_finished" and e["request_id"] in received:
                total += stamp(e["timestamp"]) - stamp(received[e["request_id"]])
        return total

    def peak_rss_mib(self) -> float:
        for line in open(f"/proc/{self.server.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        self.client.stdin.close()
        self.client.wait(30)
        os.killpg(self.server.pid, 15)
        try:
            self.server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, 9)
            self.server.wait()
        shutil.rmtree(self.log_dir, ignore_errors=True)


def wait_until_quiet(limit_seconds: float = 60.0) -> None:
    """Waits until the machine's CPUs are idle (under 5% busy over half a
    second): a server answers /health before its workers have started, and on
    2 cores a reference worker still importing its modules halved our rate."""

    def busy_and_total() -> tuple[int, int]:
        with open("/proc/stat") as stat:
            fields = [int(x) for x in stat.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle, iowait
        return sum(fields) - idle, sum(fields)

    deadline = time.monotonic() + limit_seconds
    while time.monotonic() < deadline:
        busy0, total0 = busy_and_total()
        time.sleep(0.5)
        busy1, total1 = busy_and_total()
        if total1 > total0 and (busy1 - busy0) / (total1 - total0) < 0.05:
            return
    print(f"note: the machine was still busy after {limit_seconds:.0f} s; timing anyway", file=sys.stderr)


def stamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,64,256,1024", help="upload sizes in MiB (default: 1,64,256,1024)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per cell; each cell is the median (default: 3)")
    parser.add_argument(
        "--reference",
        default=str(DEFAULT_REFERENCE) if DEFAULT_REFERENCE.exists() else "",
        help="a Python with kcoral==0.1.1 and its server's dependencies ('' to skip)",
    )
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument(
        "--reuse-workers",
        action="store_true",
        help="reuse workers (--max-requests-per-worker 0), so a GPU worker's CUDA start is not timed",
    )
    args = parser.parse_args()
    # A TERM ends the run through the finally blocks, which stop the servers it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sizes = [int(s) * MIB for s in args.sizes.split(",")]
    kind = "tensor" if args.device == "gpu" else "bytes"
    source = CHECKSUM if kind == "tensor" else LENGTH

    names = ["ours"] + (["reference"] if args.reference else [])
    pythons = {"ours": sys.executable, "reference": args.reference}
    rows, peak = [], 0.0
    for size in sizes:
        # Fresh servers for each size, so that what one size left in the caches
        # (GiB on a 24 GiB machine) does not slow the next down.
        sides = [Side(name, pythons[name], args.device, source, args.reuse_workers) for name in names]
        try:
            wait_until_quiet()
            for state in ("cold", "warm"):
                cells = {}
                for side in sides:
                    runs = [side.upload(size, state, kind) for _ in range(args.rounds)]
                    cells[side.name] = Timing(*(statistics.median(column) for column in zip(*runs)))
                    rounds = ", ".join(f"{r.wall * 1e3:.0f}/{r.server * 1e3:.0f}" for r in runs)
                    print(
                        f"{side.name} {size // MIB} MiB {state}: end to end/server ms by round: {rounds}",
                        file=sys.stderr,
                        flush=True,
                    )
                rows.append((size, state, cells))
                print_row(rows[-1], names)
            peak = max(peak, sides[0].peak_rss_mib())
        finally:
            for side in sides:
                side.stop()
    print()
    workers = "reused workers" if args.reuse_workers else "a fresh worker per request"
    print(
        f"{kind} uploads, {args.device} server, {workers}, median of {args.rounds} rounds; "
        "MB/s = 10^6 B/s end to end"
    )
    header = "| size | state | ours program | ours upload instruction | ours client CPU | "
    header += " | ".join(f"{n} end-to-end | {n} MB/s | {n} server" for n in names)
    if len(names) == 2:
        header += " | ours/ref MB/s"
    header += " |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for row in rows:
        print(format_row(row, names))
    print(f"\nour server's peak RSS (VmHWM): {peak:.0f} MiB (largest upload {max(sizes) // MIB} MiB)")


def print_row(row, names) -> None:
    print(format_row(row, names), file=sys.stderr, flush=True)


def format_row(row, names) -> str:
    size, state, cells = row
    ours = cells["ours"]
    out = (
        f"| {size // MIB} MiB | {state} | {ours.program * 1e3:.1f} ms | {ours.first_instruction * 1e3:.1f} ms"
        f" | {ours.client_cpu * 1e3:.0f} ms |"
    )
    for name in names:
        cell = cells[name]
        out += f" {cell.wall * 1e3:.1f} ms | {size / cell.wall / 1e6:.0f} | {cell.server * 1e3:.1f} ms |"
    if len(names) == 2:
        out += f" {cells['reference'].wall / cells['ours'].wall:.2f}x |"
    return out


if __name__ == "__main__":
    main()
