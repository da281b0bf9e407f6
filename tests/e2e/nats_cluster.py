"""Real NATS JetStream servers for the cluster tests: `NatsCluster(tmp, size=3)` starts `size`
nats-server processes on 127.0.0.1, routed into one cluster with JetStream on (an R3 cluster
survives losing one), and waits until JetStream has a leader. `stop()` stops each by its pid.
"""

import contextlib
import hashlib
import hmac
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

# Debian installs it in /usr/sbin, which a user's PATH may lack.
NATS_SERVER = shutil.which("nats-server") or shutil.which("nats-server", path="/usr/sbin:/usr/local/sbin")


# The cluster secret of every test cluster, and the X-KCoral-Peer header a node signs with it.
CLUSTER_SECRET = "test-cluster-secret-0123456789"


def peer_signature(method: str, target: str, secret: str = CLUSTER_SECRET) -> str:
    """X-KCoral-Peer for a request, as cluster/peer_auth.cc signs one."""
    now = str(int(time.time()))
    message = f"{now}\n{method}\n{target}".encode()
    return now + "." + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def cluster_key(idempotency_key: str, tenant: str = "") -> str:
    """The key a node files a request under (server/cluster_entry.cc ClusterKey): the client's
    Idempotency-Key under its tenant ("" without an access key)."""
    return "k-" + hashlib.sha256(f"{tenant}\n{idempotency_key}".encode()).hexdigest()[:48]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class NatsWire:
    """A bare NATS client on the text protocol, for what the tests ask the servers themselves
    (a JetStream API request) or overhear (a subject's messages): `request` answers with the
    reply's payload, `listen` collects each message of a subject on a thread of its own."""

    def __init__(self, port: int, timeout: float = 5):
        self.conn = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        self._line()  # INFO
        self.conn.sendall(b'CONNECT {"verbose":false}\r\n')
        self.messages: list[tuple[str, bytes]] = []
        self._sid = 0

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            chunk = self.conn.recv(65536)
            if not chunk:
                raise ConnectionError("the NATS server closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _next_message(self) -> tuple[str, bytes]:
        """The next MSG (answering the server's PINGs meanwhile)."""
        while True:
            line = self._line()
            if line == b"PING":
                self.conn.sendall(b"PONG\r\n")
            elif line.startswith(b"MSG "):
                parts = line.split()
                size = int(parts[-1])
                while len(self.buffer) < size + 2:
                    self.buffer += self.conn.recv(65536)
                payload, self.buffer = self.buffer[:size], self.buffer[size + 2 :]
                return parts[1].decode(), payload

    def request(self, subject: str, payload: bytes = b"") -> bytes:
        self._sid += 1
        inbox = f"_INBOX.kctest.{self._sid}"
        self.conn.sendall(
            f"SUB {inbox} {self._sid}\r\nPUB {subject} {inbox} {len(payload)}\r\n".encode() + payload + b"\r\n"
        )
        return self._next_message()[1]

    def listen(self, subject: str) -> None:
        self._sid += 1
        self.conn.sendall(f"SUB {subject} {self._sid}\r\nPING\r\n".encode())
        while self._line() != b"PONG":  # subscribed once the server answers the PING after it
            pass
        self.conn.settimeout(None)
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                self.messages.append(self._next_message())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        self.conn.close()


def _jetstream_ready(port: int) -> bool:
    """A JetStream API request answered (not 'no responders' or a leaderless error)."""
    with contextlib.suppress(OSError, ConnectionError):
        wire = NatsWire(port, timeout=1)
        try:
            return b'"error"' not in wire.request("$JS.API.INFO")
        finally:
            wire.close()
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
                "-js", "-sd", str(tmp / f"nats-{i}"),
            ]  # fmt: skip
            if size > 1:  # one server alone runs JetStream without a cluster (it would wait for routes)
                command += [
                    "--cluster_name", name, "--cluster", f"nats://127.0.0.1:{self.route_ports[i]}", "--routes", routes,
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
