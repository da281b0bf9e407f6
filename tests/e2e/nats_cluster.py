"""Real NATS JetStream servers for the cluster tests: `NatsCluster(tmp, size=3)` starts `size`
nats-server processes on 127.0.0.1 (kcoral.tools.nats_brokers: each syncs before it
acknowledges), routed into one cluster with JetStream on (an R3 cluster survives losing one),
and waits until JetStream has a leader. `stop()` stops each by its pid.
"""

import contextlib
import hashlib
import hmac
import socket
import threading
import time

from kcoral.tools.nats_brokers import NatsBrokers


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


class NatsCluster(NatsBrokers):
    """The brokers of one test (or module): `processes[i]` may be killed and set to None by a
    test; `urls` and `flag` name them for the nodes."""
