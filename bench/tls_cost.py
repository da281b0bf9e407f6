"""What HTTPS costs (issue 27): a 256 MiB upload and a trivial request, over
plain HTTP and over TLS, in one run.

    python bench/tls_cost.py [--rounds 5] [--requests 100] [--upload-mib 256]

Makes a throwaway CA and server certificate with the `openssl` command
(tests/e2e/pki.py), starts two CPU servers on free loopback ports, one plain
and one with --tls-cert/--tls-key, both reusing their workers
(--max-requests-per-worker 0, so a worker's start is not what is timed), each
with a blob cache that holds four uploads, filled by a warm-up; then it
measures them in turns, round by round, with our Client:

- upload: a program uploading `bytes` of --upload-mib MiB (fresh each round,
  so the blob is really sent, ahead by POST /blobs) and returning their length.
  "end to end" is the client's wall time for execute() (hashing included);
  "server receive" is the server's `blob_received` total_ms, from the POST's
  header to its stored blob (reading, decrypting, hashing, storing);
- trivial: `x + 1` --requests times in a row on one kept-alive connection,
  and again with a new connection for each (`Connection: close`), which for
  TLS adds a full handshake (TLS 1.3, ECDSA P-256) per request.

Server CPU is the server process's own user+system time over the phase
(workers excluded), per request. Every cell is the median over rounds of each
round's median (uploads: of each round's one upload); the last column is TLS
over plain. Each round is printed on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from kcoral import Client, Program

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))  # the test suite's throwaway PKI
from pki import make_pki  # noqa: E402

MIB = 1 << 20
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Side:
    """One server, plain or TLS, and what its client trusts."""

    def __init__(self, name: str, tls_flags: list[str], ca: Path | None, cache_bytes: int):
        self.name = name
        self.ca = ca
        self.port = free_port()
        self.url = f"{'https' if tls_flags else 'http'}://127.0.0.1:{self.port}"
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"kcoral-tls-cost-{name}-"))
        flags = ["--device", "cpu", "--num-workers", "2", "--max-requests-per-worker", "0"]
        flags += ["--host", "127.0.0.1", "--port", str(self.port), "--log-dir", str(self.log_dir)]
        flags += ["--no-log-console", "--max-request-bytes", str(2 << 30), "--cache-capacity-bytes", str(cache_bytes)]
        self.server = subprocess.Popen(
            [sys.executable, "-m", "kcoral", "server", *flags, *tls_flags],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        verify = ssl.create_default_context(cafile=ca) if ca else True
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(self.url + "/health", timeout=1, verify=verify).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the {name} server did not start")
            time.sleep(0.1)

    def client(self, **options) -> Client:
        return Client(self.url, ca=self.ca, **options)

    def cpu_seconds(self) -> float:
        with open(f"/proc/{self.server.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICKS

    def blob_ms(self) -> list[float]:
        times = []
        for path in self.log_dir.glob("runs/*/events.jsonl"):
            for line in path.read_text().splitlines():
                event = json.loads(line)
                if event["event"] == "blob_received":
                    times.append(event["total_ms"])
        return times

    def stop(self) -> None:
        os.killpg(self.server.pid, signal.SIGTERM)
        try:
            self.server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.server.pid, signal.SIGKILL)
            self.server.wait()


def upload_program(data: bytes) -> Program:
    program = Program()
    blob = program.upload(kind="bytes", value=data)
    module = program.upload(kind="module", source="def main(data):\n    return len(data)\n")
    program.return_(key="out", value=program.run(fn=program.get_function(module=module, name="main"), args=[blob]))
    return program


def trivial_program() -> Program:
    program = Program()
    module = program.upload(kind="module", source="def f(x):\n    return x + 1\n")
    program.return_(key="out", value=program.run(fn=program.get_function(module=module, name="f"), args=[1]))
    return program


def measure_upload(side: Side, size: int) -> tuple[float, float, float]:
    """(end to end ms, server receive ms, server CPU ms) of one upload of fresh bytes."""
    data = os.urandom(16) * (size // 16)  # fresh each round, fast to make
    seen = len(side.blob_ms())
    cpu = side.cpu_seconds()
    with side.client() as client:
        start = time.perf_counter()
        result = client.execute(upload_program(data))
        wall = time.perf_counter() - start
    assert result.completed and result.results["out"] == size, result.error
    time.sleep(0.1)  # its event follows the reply
    received = side.blob_ms()[seen:]
    return wall * 1e3, received[0] if received else float("nan"), (side.cpu_seconds() - cpu) * 1e3


def measure_trivial(side: Side, requests: int, new_connections: bool) -> tuple[float, float]:
    """(median ms, server CPU ms per request) of `requests` trivial programs in a row."""
    headers = {"Connection": "close"} if new_connections else None
    program = trivial_program()
    latencies = []
    with side.client(headers=headers) as client:
        client.execute(program)  # a connection open, for the kept-alive series
        cpu = side.cpu_seconds()
        for _ in range(requests):
            start = time.perf_counter()
            result = client.execute(program)
            latencies.append((time.perf_counter() - start) * 1e3)
            assert result.completed, result.error
        spent = side.cpu_seconds() - cpu
    return statistics.median(latencies), spent / requests * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="turns each server takes (default: 5)")
    parser.add_argument("--requests", type=int, default=100, help="trivial requests per series and round")
    parser.add_argument("--upload-mib", type=int, default=256, help="upload size in MiB (default: 256)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the finally below stops the servers
    size = args.upload_mib * MIB

    with tempfile.TemporaryDirectory(prefix="kcoral-tls-cost-pki-") as directory:
        pki = make_pki(Path(directory))
        sides = []
        try:
            # The smallest blob tier that keeps an upload (a blob may take a quarter of it), filled
            # by the warm-up: then each upload evicts the oldest, whose pages it reuses. A larger
            # tier would have every round write into memory the VM never touched, whose cost
            # grows and varies (docs/data-path.md) and swamps the transport's.
            cache_bytes = 4 * size
            sides.append(Side("plain", [], None, cache_bytes))
            tls_flags = ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]
            sides.append(Side("tls", tls_flags, pki.ca, cache_bytes))
            for side in sides:  # warm-up, not counted: the tier filled, first connections made
                for _ in range(4):
                    measure_upload(side, size)
                measure_trivial(side, 10, new_connections=True)
            cells: dict[tuple[str, str], list[float]] = {}
            for round_index in range(args.rounds):
                for side in sides:
                    wall, receive, cpu = measure_upload(side, size)
                    kept, kept_cpu = measure_trivial(side, args.requests, new_connections=False)
                    fresh, fresh_cpu = measure_trivial(side, args.requests, new_connections=True)
                    row = {
                        "upload end to end ms": wall,
                        "upload server receive ms": receive,
                        "upload server CPU ms": cpu,
                        "trivial, kept-alive connection, ms": kept,
                        "trivial, new connection each, ms": fresh,
                        "server CPU per trivial request (kept-alive), ms": kept_cpu,
                        "server CPU per trivial request (new connection), ms": fresh_cpu,
                    }
                    for what, value in row.items():
                        cells.setdefault((what, side.name), []).append(value)
                    shown = ", ".join(f"{what} {value:.2f}" for what, value in row.items())
                    print(f"round {round_index + 1} {side.name}: {shown}", file=sys.stderr, flush=True)
        finally:
            for side in sides:
                side.stop()

    print(
        f"\nTLS cost, CPU servers (2 workers, reused), {os.cpu_count()} cores, {args.upload_mib} MiB upload, "
        f"{args.requests} trivial requests per series, median of {args.rounds} rounds"
    )
    print("| measure | plain HTTP | HTTPS | HTTPS/plain |")
    print("|---|---|---|---|")
    for what in dict.fromkeys(what for what, _ in cells):
        plain = statistics.median(cells[(what, "plain")])
        tls = statistics.median(cells[(what, "tls")])
        print(f"| {what} | {plain:.2f} | {tls:.2f} | {tls / plain:.2f}x |")
    mb_s = {name: size / statistics.median(cells[("upload end to end ms", name)]) / 1e3 for name in ("plain", "tls")}
    print(f"\nupload end to end: {mb_s['plain']:.0f} MB/s plain, {mb_s['tls']:.0f} MB/s HTTPS (10^6 B/s)")


if __name__ == "__main__":
    main()
