"""Processes for the cluster benches (bench/cluster*.py): NATS JetStream servers and KCoral
cluster nodes on loopback, each restartable on its own port with its own arguments, so a
restarted node keeps its node id (HOST-PORT) and a restarted NATS server its JetStream storage;
and the broker's CPU and bytes (Broker). Everything is stopped by pid or by its own process
group, never by name.

The brokers are kcoral.tools.nats_brokers', as the tests' are (each syncs before it
acknowledges); this file adds what the overhead benches read of them (/varz, CPU).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
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

sys.path.append(str(REPO / "tests" / "e2e"))  # the tests' bare NATS client and peer signatures

from nats_cluster import NatsWire, cluster_key  # noqa: E402, F401 - re-exported for the benches

from kcoral import Client, Program  # noqa: E402
from kcoral.tools.nats_brokers import NatsBrokers, free_port, nats_request  # noqa: E402, F401 - re-exported

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


def cpu_seconds(pid: int) -> float:
    """utime + stime of a live process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class NatsServers(NatsBrokers):
    """The bench's brokers (kcoral.tools.nats_brokers), with what the benches read of them."""

    def varz(self, i: int) -> dict:
        return httpx.get(f"http://127.0.0.1:{self.monitor_ports[i]}/varz", timeout=5).json()

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(self.processes[i].pid) for i in self.live())


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
