"""Real NATS JetStream servers for the cluster tests: `NatsCluster(tmp, size=3)` starts `size`
nats-server processes on 127.0.0.1, routed into one cluster with JetStream on (an R3 cluster
survives losing one), and waits until JetStream has a leader. `stop()` stops each by its pid.
"""

import contextlib
import hashlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

# Debian installs it in /usr/sbin, which a user's PATH may lack.
NATS_SERVER = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin:/usr/local/sbin")


def cluster_key(idempotency_key: str, tenant: str = "") -> str:
    """The key a node files a request under (server/cluster_entry.cc ClusterKey): the client's
    Idempotency-Key under its tenant ("" without an access key)."""
    return "k-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:48]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jetstream_ready(port: int) -> bool:
    """A JetStream API request answered (not 'no responders' or a leaderless error)."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
        conn.settimeout(1)
        conn.recv(4096)  # INFO
        conn.sendall(b'CONNECT {"verbose":false}\r\nSUB _INBOX.ready 1\r\nPUB $JS.API.INFO _INBOX.ready 0\r\n\r\n')
        deadline = time.monotonic() + 1
        data = b""
        while time.monotonic() < deadline and b"MSG _INBOX.ready" not in data:
            with contextlib.suppress(socket.timeout):
                data += conn.recv(4096)
        return b"MSG _INBOX.ready" in data and b'"error"' not in data
    return False


class NatsCluster:
    def __init__(self, tmp: Path, size: int = 3, name: str = "kc"):
        if NATS_SERVER is None:
            raise RuntimeError("nats-server is not installed (apt-get install nats-server; make deps does)")
        self.client_ports = [_free_port() for _ in range(size)]
        self.route_ports = [_free_port() for _ in range(size)]
        routes = ",".join(f"nats://127.0.0.1:{p}" for p in self.route_ports)
        self.processes: list[subprocess.Popen | None] = []
        self.logs = []
        for i in range(size):
            log = open(tmp / f"nats-{i}.log", "wb")
            self.logs.append(log)
            command = [
                NATS_SERVER, "-a", "127.0.0.1", "-p", str(self.client_ports[i]), "-n", f"{name}-{i}",
                "-js", "-sd", str(tmp / f"nats-{i}"), "--cluster_name", name,
                "--cluster", f"nats://127.0.0.1:{self.route_ports[i]}", "--routes", routes,
            ]  # fmt: skip
            self.processes.append(subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True))
        self.wait_ready()

    @property
    def urls(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    @property
    def flag(self) -> str:
        return ",".join(self.urls)

    def wait_ready(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(p is None or p.poll() is None for p in self.processes) and all(
                _jetstream_ready(port) for port, p in zip(self.client_ports, self.processes) if p is not None
            ):
                return
            time.sleep(0.2)
        self.stop()
        raise RuntimeError("the NATS cluster did not elect a JetStream leader")

    def stop(self) -> None:
        for process in self.processes:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            if process is not None:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self.logs:
            log.close()
