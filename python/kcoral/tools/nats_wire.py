"""NatsWire: a bare NATS client on the text protocol, for what the tests and benches ask the
servers themselves (a JetStream API request) or overhear (a subject's messages). `request`
answers with the reply's payload (`last_status` keeps its status line, "" for none, such as
"NATS/1.0 408 Request Timeout"); `listen` collects each message of a subject on a thread of
its own into `messages`."""

from __future__ import annotations

import contextlib
import json
import socket
import threading


class NatsWire:
    def __init__(self, port: int, timeout: float = 5):
        self.conn = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        self._line()  # INFO
        self.conn.sendall(b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n')
        self.messages: list[tuple[str, bytes]] = []
        self.last_status = ""
        self._sid = 0

    def _line(self) -> bytes:
        while b"\r\n" not in self.buffer:
            chunk = self.conn.recv(65536)
            if not chunk:
                raise ConnectionError("the NATS server closed the connection")
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def _next_message(self) -> tuple[str, bytes, str]:
        """The next message: (subject, payload, its headers' status line or ""), answering the
        server's PINGs meanwhile."""
        while True:
            line = self._line()
            if line == b"PING":
                self.conn.sendall(b"PONG\r\n")
                continue
            parts = line.split()
            if parts[0] not in (b"MSG", b"HMSG"):
                continue
            size = int(parts[-1])
            while len(self.buffer) < size + 2:
                self.buffer += self.conn.recv(65536)
            data, self.buffer = self.buffer[:size], self.buffer[size + 2 :]
            if parts[0] == b"MSG":
                return parts[1].decode(), data, ""
            headers = int(parts[-2])
            return parts[1].decode(), data[headers:], data[:headers].split(b"\r\n", 1)[0].decode()

    def request(self, subject: str, payload: bytes = b"") -> bytes:
        self._sid += 1
        inbox = f"_INBOX.kc.{self._sid}"
        self.conn.sendall(
            f"SUB {inbox} {self._sid}\r\nPUB {subject} {inbox} {len(payload)}\r\n".encode() + payload + b"\r\n"
        )
        while True:
            subject_heard, data, self.last_status = self._next_message()
            if subject_heard == inbox:  # not a late reply to an earlier request
                self.conn.sendall(f"UNSUB {self._sid}\r\n".encode())
                return data

    def api(self, subject: str, payload: dict | None = None) -> dict:
        """A JetStream API request ($JS.API.<subject>) and its JSON reply."""
        body = json.dumps(payload).encode() if payload is not None else b""
        return json.loads(self.request("$JS.API." + subject, body) or b"{}")

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
                self.messages.append(self._next_message()[:2])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.shutdown(socket.SHUT_RDWR)
        self.conn.close()
