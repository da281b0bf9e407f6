"""Processes for the cluster benches (bench/cluster*.py): NATS JetStream servers and KCoral
cluster nodes on loopback, each restartable on its own port with its own arguments, so a
restarted node keeps its node id (HOST-PORT) and a restarted NATS server its JetStream storage;
and the broker's CPU and bytes (Broker). Everything is stopped by pid or by its own process
group, never by name.

tests/e2e/nats_cluster.py starts NATS for the tests; this copy adds what a kill test needs
(restart, the stream's leader) and what the overhead benches read (the monitoring port). Its
bare NATS client (NatsWire) serves both.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

import fault_soak  # bench/: its /proc scan for tagged processes

REPO = Path(__file__).resolve().parents[1]
# This checkout's kcoral, for this process and the servers it starts (as tests/conftest.py does).
_PYTHON = str(REPO / "python")
if _PYTHON not in sys.path:
    sys.path.insert(0, _PYTHON)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [_PYTHON, os.environ.get("PYTHONPATH")]))
sys.path.append(str(REPO / "tests" / "e2e"))  # the tests' bare NATS client

from nats_cluster import NatsWire  # noqa: E402

from kcoral import Client, Program  # noqa: E402

# Debian installs it in /usr/sbin, which a user's PATH may lack.
NATS_SERVER = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin:/usr/local/sbin")
SECRET = "bench-cluster-secret-0123456789"
TAG = "KCORAL_CLUSTER_BENCH"  # in each node's environment, inherited by all it starts
TICKS = os.sysconf("SC_CLK_TCK")


def out_folder(out: Path | None, prefix: str) -> Path:
    """The run's folder: `out` (--out), which must be new or empty, since the nodes' events are
    read back from it and an earlier run's would mix in; else a fresh temporary folder."""
    if out is None:
        return Path(tempfile.mkdtemp(prefix=prefix))
    if out.exists() and any(out.iterdir()):
        sys.exit(
            f"--out {out}: the folder holds an earlier run (the nodes' events are read back from it); give a new or empty one"
        )
    out.mkdir(parents=True, exist_ok=True)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def nats_request(port: int, subject: str, timeout: float = 2.0) -> dict | None:
    """One JetStream API request: the JSON reply, or None."""
    with contextlib.suppress(OSError, ConnectionError, ValueError):
        wire = NatsWire(port, timeout)
        try:
            return json.loads(wire.request(subject))
        finally:
            wire.close()
    return None


class NatsServers:
    """`size` nats-server processes routed into one cluster with JetStream on; with `monitor`,
    each serves /varz on a port of its own."""

    def __init__(self, root: Path, size: int = 3, monitor: bool = False, name: str = "kc"):
        if NATS_SERVER is None:
            raise SystemExit("nats-server is not installed (apt-get install nats-server; make deps does)")
        self.name = name
        self.client_ports = [free_port() for _ in range(size)]
        self.monitor_ports = [free_port() for _ in range(size)] if monitor else []
        route_ports = [free_port() for _ in range(size)]
        routes = ",".join(f"nats://127.0.0.1:{p}" for p in route_ports)
        self.commands = []
        for i in range(size):
            self.commands.append([
                NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.client_ports[i]), "-n", f"{name}-{i}",
                "-js", "-sd", str(root / f"nats-{i}"), "--cluster_name", name,
                "--cluster", f"nats://127.0.0.1:{route_ports[i]}", "--routes", routes,
                *(["-m", str(self.monitor_ports[i])] if monitor else []),
            ])  # fmt: skip
        self.log_paths = [root / f"nats-{i}.log" for i in range(size)]
        self.processes: list[subprocess.Popen | None] = [None] * size
        for i in range(size):
            self.start(i)
        try:
            self.wait_ready()
        except RuntimeError:
            self.stop()  # the caller never gets the object to stop: a failed start leaves nothing
            raise

    @property
    def flag(self) -> str:
        """The value of a node's --cluster."""
        return ",".join(f"nats://127.0.0.1:{p}" for p in self.client_ports)

    def start(self, i: int) -> None:
        """(Re)starts server i with its first arguments and storage."""
        with open(self.log_paths[i], "ab") as log:
            self.processes[i] = subprocess.Popen(self.commands[i], stdout=log, stderr=log, start_new_session=True)

    def kill(self, i: int) -> None:
        process = self.processes[i]
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self.processes[i] = None

    def live(self) -> list[int]:
        return [i for i, p in enumerate(self.processes) if p is not None and p.poll() is None]

    def wait_ready(self, timeout: float = 30) -> None:
        """Until every live server answers a JetStream API request without an error."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answers = [nats_request(self.client_ports[i], "$JS.API.INFO", 1) for i in self.live()]
            if answers and all(a is not None and "error" not in a for a in answers):
                return
            time.sleep(0.2)
        raise RuntimeError("the NATS cluster did not elect a JetStream leader")

    def stream_leader(self, stream: str) -> int | None:
        """Index of the server that leads `stream`'s Raft group, asked of any live server."""
        for i in self.live():
            info = nats_request(self.client_ports[i], f"$JS.API.STREAM.INFO.{stream}")
            leader = ((info or {}).get("cluster") or {}).get("leader", "")
            if leader.startswith(f"{self.name}-"):
                return int(leader.rsplit("-", 1)[1])
        return None

    def varz(self, i: int) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.monitor_ports[i]}/varz", timeout=5).json()

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(self.processes[i].pid) for i in self.live())

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for i, process in enumerate(self.processes):
            if process is not None:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    self.kill(i)


def trivial_program() -> Program:
    program = Program()
    module = program.upload(id="m", kind="module", source="def main():\n    return 1\n")
    fn = program.get_function(id="f", module=module, name="main")
    program.return_(key="out", value=program.run(id="r", fn=fn, args=[]))
    return program


def timed(client: Client, program: Program) -> float:
    """Wall ms of one request of `program`, a trivial program (its answer: 1)."""
    start = time.perf_counter()
    result = client.execute(program, timeout_seconds=60)
    elapsed = (time.perf_counter() - start) * 1e3
    assert result.completed and result.results["out"] == 1, result.error
    return elapsed


class Broker:
    """The NATS servers' CPU seconds and bytes, read as one sample."""

    def __init__(self, nats: NatsServers):
        self.nats = nats

    def sample(self) -> dict:
        varz = [self.nats.varz(i) for i in range(len(self.nats.client_ports))]
        clients = 0
        for port in self.nats.monitor_ports:
            connz = httpx.get(f"http://127.0.0.1:{port}/connz?limit=10000", timeout=5).json()
            clients += sum(c["in_bytes"] + c["out_bytes"] for c in connz["connections"])
        return {
            "t": time.monotonic(),
            "cpu_s": self.nats.cpu_seconds(),
            "bytes": sum(v["in_bytes"] + v["out_bytes"] for v in varz),
            "client_bytes": clients,
        }

    @staticmethod
    def per_request(before: dict, after: dict, requests: int, background: dict) -> dict:
        """CPU ms and bytes per request between two samples, less the background rates."""
        seconds = after["t"] - before["t"]
        net = {k: after[k] - before[k] - background[k] * seconds for k in ("cpu_s", "bytes", "client_bytes")}
        return {
            "cpu_ms": net["cpu_s"] * 1e3 / requests,
            "bytes": net["bytes"] / requests,
            "client_bytes": net["client_bytes"] / requests,
        }


def background_rates(broker: Broker, seconds: float) -> dict:
    before = broker.sample()
    time.sleep(seconds)
    after = broker.sample()
    span = after["t"] - before["t"]
    return {k: (after[k] - before[k]) / span for k in ("cpu_s", "bytes", "client_bytes")}


class Node:
    """One `kcoral server` on a fixed loopback port. Each life logs to root/life<N>, so the
    events of every life are kept. `flags` come after the common ones; `env` is added."""

    def __init__(self, root: Path, flags: list[str], env: dict | None = None, port: int | None = None):
        self.root = root
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.node_id = f"127.0.0.1-{self.port}"
        self.flags = flags
        self.env = {**os.environ, **(env or {})}
        self.lives = 0
        self.leaked = 0  # processes of a dead life that were still there, killed by pid
        self.process: subprocess.Popen | None = None
        self.tag = ""

    @property
    def log_dir(self) -> Path:
        return self.root / f"life{self.lives}"

    def start(self, ready_timeout: float = 60) -> None:
        self.lives += 1
        self.log_dir.mkdir(parents=True)
        self.tag = uuid.uuid4().hex
        command = [
            sys.executable, "-m", "kcoral", "server", "--device", "cpu", "--host", "127.0.0.1",
            "--port", str(self.port), "--log-dir", str(self.log_dir), "--no-log-console",
            "--disk-cache-dir", str(self.root / "disk-cache"), "--build-cache-dir", str(self.root / "build-cache"),
            *self.flags,
        ]  # fmt: skip
        with open(self.log_dir / "server.stderr", "wb") as stderr:
            self.process = subprocess.Popen(
                command,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                env={**self.env, TAG: self.tag},
            )
        deadline = time.monotonic() + ready_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"node {self.node_id} exited: {(self.log_dir / 'server.stderr').read_text()[-2000:]}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.url + "/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"node {self.node_id} did not become healthy in {ready_timeout} s")

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL to the node's process group, as a machine that loses power would do."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._reap_leftovers()

    def stop(self, timeout: float = 30) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self._reap_leftovers()

    def _reap_leftovers(self, grace: float = 5.0) -> None:
        deadline = time.monotonic() + grace
        while (left := tagged(self.tag)) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in left:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        self.leaked += len(left)

    def events(self, current_life_only: bool = False) -> list[dict]:
        dirs = [self.log_dir] if current_life_only else [self.root / f"life{n}" for n in range(1, self.lives + 1)]
        found = []
        for directory in dirs:
            for path in sorted(directory.glob("runs/*/events.jsonl")):
                for line in path.read_text().splitlines():
                    with contextlib.suppress(ValueError):  # a line cut short by SIGKILL
                        found.append(json.loads(line))
        return found


def wait_for_view(nodes: list[Node], timeout: float = 30) -> None:
    """Until every node's /health lists every node (so each takes work and can route to all)."""
    ids = {n.node_id for n in nodes}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = [
            {r["node_id"] for r in httpx.get(n.url + "/health", timeout=10).json()["cluster"]["nodes"]} for n in nodes
        ]
        if all(ids <= s for s in seen):
            return
        time.sleep(0.2)
    raise RuntimeError("the nodes did not see each other")


def tagged(tag: str) -> set[int]:
    """Live (non-zombie) processes whose environment holds TAG=`tag`."""
    return fault_soak.tagged(tag, TAG)


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]
