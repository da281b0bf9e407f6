"""Fault soak: many requests, a tenth of them hostile, every answer checked.

    python bench/fault_soak.py [--requests 10000] [--concurrency 32] [--seed 1]
                               [--time-limit-seconds 900] [--workers 8] [--hostile-fraction 0.1]
                               [--private-tmpdir] [--keep-logs] [any kcoral server flag, e.g. --sandbox none]

Starts its own CPU server (`kcoral server --device cpu --num-workers 8` on a
free loopback port, plus the server flags given), then sends the requests from
a thread pool: a fixed-seed mix of benign programs, each returning a value
derived from its own random input (checked exactly), and hostile ones:

  crash  starts two `sleep 600` children (one with setsid), then SIGKILLs itself  -> 200 FAILED runtime
  spin   spins past timeout_seconds 1                                            -> 504 timeout
  flood  writes 50 MB to stdout                                                  -> 200, truncated stdout
  fork   leaves a background `sleep 600` child                                   -> 200, its value
  huge   returns a 100,000-key dict or 20 MB of bytes                            -> 200, the value
         (or 500 response_too_large, if a --max-response-bytes below it is given)
  deep   returns lists nested 200 deep                                           -> 200, the value

It prints, per kind, requests sent, answered as expected, wrong and lost (no
answer, or an error answer where another was due), p50/p99 latency;
requests/s; and the server's RSS, open fds (memfds: mostly the blob cache's),
threads, processes in its tree, the entries of the host /tmp (shared with
everything else on the machine; --private-tmpdir gives the server a TMPDIR of
its own to count instead) and processes that escaped the server's tree, at the
start and at the end. It stops by itself (all requests sent, or the time
limit) and leaves no process behind: the server is stopped by pid (SIGTERM,
then SIGKILL of its process group), and anything else carrying this run's
environment tag is killed.
Exit status 1 if an answer was wrong or lost or a process leaked.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# This checkout's kcoral, for this process and the server it starts (as tests/conftest.py does).
_PYTHON = str(Path(__file__).resolve().parents[1] / "python")
sys.path.insert(0, _PYTHON)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON, os.environ.get("PYTHONPATH")]))

from kcoral.result import decode_program_result, decode_response  # noqa: E402

TAG = "KCORAL_FAULT_SOAK"  # in the server's environment, so inherited by everything it starts
HOSTILE = ["crash", "spin", "flood", "fork", "huge", "deep"]
BENIGN = ["compute", "compute", "compute", "bytes"]
BOUNDARY = "fault-soak-7d1e"


# ------------------------------------------------------------------ programs
SOURCES = {
    "compute": (
        "import hashlib\n"
        "def main(x, s):\n"
        "    return {'sum': 7 * x + 3, 'digest': hashlib.sha256(s.encode()).hexdigest(), 'rev': s[::-1]}\n"
    ),
    "bytes": "import hashlib\ndef main(b):\n    return [hashlib.sha256(b).hexdigest(), b[::-1]]\n",
    "crash": (
        "import os, signal, subprocess\n"
        "def main(token):\n"
        "    subprocess.Popen(['sleep', '600'])\n"
        "    subprocess.Popen(['setsid', 'sleep', '600'])\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return 'survived SIGKILL ' + token\n"
    ),
    "spin": "def main(token):\n    while True:\n        pass\n",
    "flood": (
        "import os\n"
        "def main(token):\n"
        "    chunk = b'F' * (1 << 20)\n"
        "    for _ in range(50):\n"
        "        os.write(1, chunk)\n"
        "    return token\n"
    ),
    "fork": "import subprocess\ndef main(token):\n    subprocess.Popen(['sleep', '600'])\n    return token\n",
    "huge_dict": "def main(n):\n    return {f'k{i}': i for i in range(n)}\n",
    "huge_bytes": (
        "def main(block_hex, n):\n"
        "    block = bytes.fromhex(block_hex)\n"
        "    return (block * (n // len(block) + 1))[:n]\n"
    ),
    "deep": "def main(token, depth):\n    value = token\n    for _ in range(depth):\n        value = [value]\n    return value\n",
}


@dataclass
class Request:
    index: int
    kind: str  # the row of the table
    source: str
    args: list
    expected: object = None  # the decoded `out` a COMPLETED answer must carry, or a predicate on it
    blob: bytes | None = None
    timeout_seconds: float = 60


def plan(count: int, seed: int, hostile_fraction: float) -> list[Request]:
    """The whole run, fixed by the seed: kinds, inputs and expected values."""
    rng = random.Random(seed)
    requests = []
    for i in range(count):
        kind = rng.choice(HOSTILE) if rng.random() < hostile_fraction else rng.choice(BENIGN)
        token = f"{i}-{rng.getrandbits(48):012x}"
        if kind == "compute":
            x, s = rng.getrandbits(40), "".join(rng.choices(string.ascii_letters, k=16))
            expected = {"sum": 7 * x + 3, "digest": hashlib.sha256(s.encode()).hexdigest(), "rev": s[::-1]}
            requests.append(Request(i, kind, SOURCES[kind], [x, s], expected))
        elif kind == "bytes":
            blob = rng.randbytes(512)
            requests.append(
                Request(i, kind, SOURCES[kind], ["$blob"], [hashlib.sha256(blob).hexdigest(), blob[::-1]], blob=blob)
            )
        elif kind == "huge":
            # Expected values are predicates, built when checked: a thousand 20 MB values would not fit.
            if rng.random() < 0.5:
                requests.append(Request(i, "huge", SOURCES["huge_dict"], [100_000], same_as_huge_dict))
            else:
                block, n = rng.randbytes(32), 20 << 20
                digest = hashlib.sha256((block * (n // len(block) + 1))[:n]).hexdigest()
                requests.append(
                    Request(
                        i,
                        "huge",
                        SOURCES["huge_bytes"],
                        [block.hex(), n],
                        lambda out, n=n, digest=digest: isinstance(out, bytes)
                        and len(out) == n
                        and hashlib.sha256(out).hexdigest() == digest,
                    )
                )
        elif kind == "deep":
            value = token
            for _ in range(200):
                value = [value]
            requests.append(Request(i, kind, SOURCES[kind], [token, 200], value))
        elif kind == "spin":
            requests.append(Request(i, kind, SOURCES[kind], [token], timeout_seconds=1))
        else:  # crash, flood, fork
            requests.append(Request(i, kind, SOURCES[kind], [token], token))
    return requests


def same_as_huge_dict(out) -> bool:
    return isinstance(out, dict) and len(out) == 100_000 and out == {f"k{j}": j for j in range(100_000)}


def body_of(request: Request) -> tuple[bytes, str]:
    instructions = [{"op": "upload", "id": "m", "kind": "module", "source": request.source}]
    args = request.args
    if request.blob is not None:
        digest = hashlib.sha256(request.blob).hexdigest()
        instructions.append({"op": "upload", "id": "b", "kind": "bytes", "blob": digest})
        args = [{"$ref": "b"} if a == "$blob" else a for a in args]
    instructions += [
        {"op": "get_function", "id": "f", "module": {"$ref": "m"}, "name": "main"},
        {"op": "run", "id": "r", "fn": {"$ref": "f"}, "args": args},
        {"op": "return", "key": "out", "value": {"$ref": "r"}},
    ]
    program = json.dumps({"instructions": instructions, "options": {"timeout_seconds": request.timeout_seconds}})
    parts = [("program", "application/json", program.encode())]
    if request.blob is not None:
        parts.append((f"blob:{hashlib.sha256(request.blob).hexdigest()}", "application/octet-stream", request.blob))
    out = b""
    for name, content_type, data in parts:
        out += (
            (
                f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n'
                f"Content-Type: {content_type}\r\n\r\n"
            ).encode()
            + data
            + b"\r\n"
        )
    return out + f"--{BOUNDARY}--\r\n".encode(), f"multipart/form-data; boundary={BOUNDARY}"


# ------------------------------------------------------------------- checks
def verdict(request: Request, response: httpx.Response) -> str:
    """'' if the answer is the one this request must get, else what is wrong with it."""
    if response.status_code != 200:
        try:
            error = response.json().get("error", {})
        except ValueError:
            error = {}
        if request.kind == "spin" and response.status_code == 504 and error.get("kind") == "timeout":
            return ""
        if request.kind == "huge" and response.status_code == 500 and error.get("kind") == "response_too_large":
            return ""
        return f"HTTP {response.status_code} {error.get('kind')}: {str(error.get('message'))[:120]}"
    obj, parts = decode_response(response.headers.get("content-type"), response.content)
    result = decode_program_result(obj, parts)
    if request.kind == "crash":
        if result.status == "FAILED" and result.error["kind"] == "runtime":
            return ""
        return f"{result.status} {result.error and result.error['kind']}: {result.results}"
    if request.kind == "spin":
        return f"200 {result.status} where a 504 timeout was due"
    if result.status != "COMPLETED":
        return f"{result.status} {result.error['kind']}: {result.error['message'][:120]}"
    out = result.results.get("out")
    if not (request.expected(out) if callable(request.expected) else out == request.expected):
        return f"wrong value: {str(out)[:80]}"
    if request.kind == "flood" and not (result.stdout_truncated and result.stdout.startswith("F")):
        return f"stdout not truncated ({len(result.stdout)} characters)"
    return ""


@dataclass
class Row:
    sent: int = 0
    expected: int = 0
    wrong: int = 0
    lost: int = 0
    latencies_ms: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def run(url: str, requests: list[Request], concurrency: int, deadline: float) -> tuple[dict[str, Row], int, float]:
    rows = {kind: Row() for kind in BENIGN + HOSTILE}
    lock = threading.Lock()
    queue = iter(requests)
    sent = 0

    def one(client: httpx.Client, request: Request) -> None:
        content, content_type = body_of(request)
        started = time.perf_counter()
        try:
            response = client.post(
                url + "/execute",
                content=content,
                headers={"Content-Type": content_type},
                timeout=httpx.Timeout(request.timeout_seconds + 120, connect=10),
            )
            problem = verdict(request, response)
            lost = response.status_code != 200  # an error answer where another was due: its answer is lost
        except Exception as error:  # noqa: BLE001 - a lost answer is what this measures
            problem, lost = f"no answer: {type(error).__name__}: {error}", True
        elapsed_ms = (time.perf_counter() - started) * 1e3
        with lock:
            row = rows[request.kind]
            row.sent += 1
            row.latencies_ms.append(elapsed_ms)
            if not problem:
                row.expected += 1
            else:
                if lost:
                    row.lost += 1
                else:
                    row.wrong += 1
                if len(row.examples) < 3:
                    row.examples.append(f"#{request.index}: {problem}")

    def worker() -> None:
        nonlocal sent
        with httpx.Client() as client:
            while time.monotonic() < deadline:
                with lock:
                    request = next(queue, None)
                    if request is None:
                        return
                    sent += 1
                one(client, request)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return rows, sent, time.perf_counter() - started


# ------------------------------------------------------- server and /proc
def tagged(tag: str, variable: str = TAG) -> set[int]:
    """Live (non-zombie) processes whose environment holds `variable`=`tag`."""
    needle = f"{variable}={tag}".encode()
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if needle in (entry / "environ").read_bytes().split(b"\0") and state(int(entry.name)) != "Z":
                    found.add(int(entry.name))
    return found


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "?"


def tree_of(pid: int) -> set[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def snapshot(pid: int, tag: str, tmp: str) -> dict[str, object]:
    status = {}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            status[key] = value.split()
    tree = {p for p in tree_of(pid) if state(p) != "Z"}
    tmp = os.listdir(tmp)
    targets = []
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                targets.append(os.readlink(fd))
    return {
        "RSS MiB": round(int(status.get("VmRSS", [0])[0]) / 1024, 1),
        # Mapped memfd pages (blobs being served) count as shmem; the heap as anon.
        "  of it anon MiB": round(int(status.get("RssAnon", [0])[0]) / 1024, 1),
        "  of it shmem MiB": round(int(status.get("RssShmem", [0])[0]) / 1024, 1),
        "open fds": len(targets),
        "  of them memfds": sum(1 for t in targets if t.startswith("/memfd:")),  # the blob cache's, mostly
        "  of them sockets": sum(1 for t in targets if t.startswith("socket:")),
        "threads": int(status.get("Threads", [0])[0]),
        "processes in its tree": len(tree),
        "tmp entries": len(tmp),
        "tmp kcoral-*": sum(1 for name in tmp if name.startswith("kcoral-")),
        "escaped its tree": len(tagged(tag) - tree - {pid}),
    }


def start_server(
    directory: Path, workers: int, extra: list[str], tag: str, tmpdir: str | None
) -> tuple[subprocess.Popen, str, Path]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = [
        sys.executable,
        "-m",
        "kcoral",
        "server",
        "--device",
        "cpu",
        "--num-workers",
        str(workers),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-dir",
        str(directory / "logs"),
        "--no-log-console",
    ]
    if not any(a.startswith("--disk-cache-dir") for a in extra):
        command += ["--disk-cache-dir", str(directory / "disk-cache")]
    stderr_path = directory / "server.stderr"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen(
            [*command, *extra],
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
            env={**os.environ, TAG: tag, **({"TMPDIR": tmpdir} if tmpdir else {})},
        )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"server exited ({process.returncode}): {stderr_path.read_text()[-2000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                return process, url, stderr_path
        time.sleep(0.05)
    stop_server(process)
    raise SystemExit("server did not become healthy in 120 s")


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def kill_leftovers(tag: str, grace: float = 5.0) -> list[str]:
    """Kills (and names) whatever still carries this run's tag once the server is gone."""
    deadline = time.monotonic() + grace
    while (left := tagged(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    names = []
    for pid in sorted(left):
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            names.append(f"{pid} ({argv})")
            os.kill(pid, signal.SIGKILL)
    return names


# ------------------------------------------------------------------- report
def print_report(args, extra, rows, sent, seconds, before, after, leftovers, tmp) -> bool:
    print(
        f"\nKCoral fault soak: {sent} of {args.requests} requests sent, concurrency {args.concurrency}, "
        f"seed {args.seed}, {args.workers} workers, {os.cpu_count()} cores, "
        f"server flags: {' '.join(extra) or '(none)'}"
    )
    header = f"{'kind':<8} | {'sent':>6} | {'expected':>8} | {'wrong':>5} | {'lost':>5} | {'p50 ms':>8} | {'p99 ms':>8}"
    print(header)
    print("-" * len(header))
    total = Row()
    for kind in dict.fromkeys(BENIGN + HOSTILE):
        row = rows[kind]
        total.sent += row.sent
        total.expected += row.expected
        total.wrong += row.wrong
        total.lost += row.lost
        total.latencies_ms += row.latencies_ms
        print(
            f"{kind:<8} | {row.sent:>6} | {row.expected:>8} | {row.wrong:>5} | {row.lost:>5} | "
            f"{percentile(row.latencies_ms, 50):>8.1f} | {percentile(row.latencies_ms, 99):>8.1f}"
        )
    print("-" * len(header))
    print(
        f"{'total':<8} | {total.sent:>6} | {total.expected:>8} | {total.wrong:>5} | {total.lost:>5} | "
        f"{percentile(total.latencies_ms, 50):>8.1f} | {percentile(total.latencies_ms, 99):>8.1f}"
    )
    print(f"\n{total.sent / seconds:.1f} requests/s over {seconds:.1f} s")
    print(f"\n{'server':<24} | {'start':>8} | {'end':>8}    (tmp: {tmp})")
    print("-" * 46)
    for key in before:
        print(f"{key:<24} | {before[key]:>8} | {after[key]:>8}")
    print(f"{'left after stop':<24} | {'':>8} | {len(leftovers):>8}")
    problems = [f"{kind}: {example}" for kind, row in rows.items() for example in row.examples]
    if problems:
        print("\nfirst wrong or lost answers:")
        for line in dict.fromkeys(problems):
            print("  " + line)
    if leftovers:
        print("\nprocesses left after the server stopped (killed): " + ", ".join(leftovers))
    return total.wrong == 0 and total.lost == 0 and not leftovers and after["escaped its tree"] == 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--time-limit-seconds",
        type=float,
        default=900,
        help="stop sending new requests after this long (those in flight are still answered)",
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--hostile-fraction", type=float, default=0.1)
    parser.add_argument("--keep-logs", action="store_true", help="keep the server's log directory")
    parser.add_argument(
        "--private-tmpdir",
        action="store_true",
        help="give the server its own TMPDIR and count that instead of the host /tmp, which "
        "other processes on the machine (another test run) also write to",
    )
    args, extra = parser.parse_known_args()

    requests = plan(args.requests, args.seed, args.hostile_fraction)
    tag = uuid.uuid4().hex
    directory = Path(tempfile.mkdtemp(prefix="fault-soak-"))
    tmp = str(directory / "tmp") if args.private_tmpdir else tempfile.gettempdir()
    if args.private_tmpdir:
        os.mkdir(tmp)
    process, url, _ = start_server(directory, args.workers, extra, tag, tmp if args.private_tmpdir else None)
    try:
        time.sleep(2)  # the stand-by workers are up
        before = snapshot(process.pid, tag, tmp)
        rows, sent, seconds = run(url, requests, args.concurrency, time.monotonic() + args.time_limit_seconds)
        time.sleep(3)  # replacements started, killed trees reaped
        after = snapshot(process.pid, tag, tmp)
    finally:
        stop_server(process)
        leftovers = kill_leftovers(tag)
    ok = print_report(args, extra, rows, sent, seconds, before, after, leftovers, tmp)
    if ok and not args.keep_logs:
        shutil.rmtree(directory, ignore_errors=True)
    else:
        print(f"\nserver log directory: {directory}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
