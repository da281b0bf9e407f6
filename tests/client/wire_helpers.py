"""Helpers for client tests: KCoral wire bodies, a scripted HTTP server on
loopback, and `make_client`, a fixture that runs a test with both Client and
AsyncClient."""

from __future__ import annotations

import asyncio
import email.parser
import email.policy
import hashlib
import inspect
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from kcoral import AsyncClient, Client


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outcome(status: str = "COMPLETED", results: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": status,
        "request_id": "7f61b94e-034a-4e80-b67d-eca52bb952cc",
        "queue_ms": 0.4,
        "elapsed_ms": 812.6,
        "lease_wait_ms": 0.0,
        "lease_held_ms": 1,
        "stdout": "hello\n",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "results": results if results is not None else {},
    }
    body.update(extra)
    return body


def multipart(
    result: dict[str, Any] | bytes,
    parts: list[tuple[str, bytes]],
    boundary: str = "kcoral-0123456789abcdef0123456789abcdef",
    result_type: str = "application/json",
    part_type: str = "application/octet-stream",
) -> tuple[str, bytes]:
    """Return (content type, body) of a multipart response."""
    raw = result if isinstance(result, bytes) else json.dumps(result).encode()
    out = [
        f"--{boundary}\r\n".encode(),
        f'Content-Disposition: form-data; name="result"\r\nContent-Type: {result_type}\r\n\r\n'.encode(),
        raw,
    ]
    for name, data in parts:
        out.append(f"\r\n--{boundary}\r\n".encode())
        out.append(f'Content-Disposition: form-data; name="{name}"\r\nContent-Type: {part_type}\r\n\r\n'.encode())
        out.append(data)
    out.append(f"\r\n--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(out)


def bytes_node(data: bytes, index: int) -> dict[str, Any]:
    return {"type": "bytes", "part": f"return:{index}", "sha256": sha(data)}


def file_node(data: bytes, index: int) -> dict[str, Any]:
    return {"type": "file", "size": len(data), "part": f"return:{index}", "sha256": sha(data)}


def tensor_node(dtype: str, shape: list[int], data: bytes, index: int) -> dict[str, Any]:
    return {"type": "tensor", "dtype": dtype, "shape": shape, "part": f"return:{index}", "sha256": sha(data)}


REQUEST_ID = "0b7e1f9a-4c39-4a8e-9d47-4d3c8e0a1b2c"

Reply = tuple[int, dict[str, str], bytes]

#: Read the request, then close the connection without a word (a node that dies mid-request).
HANG_UP: Reply = (0, {}, b"")


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    h = {"Content-Type": "application/json", "X-Request-ID": REQUEST_ID}
    h.update(headers or {})
    return status, h, json.dumps(body).encode()


def cache_miss(missing: list[str], node: str | None = None) -> Reply:
    return json_reply(
        {"status": "CACHE_MISS", "request_id": REQUEST_ID, "missing_blobs": missing},
        headers={"X-KCoral-Node": node} if node else None,
    )


class Recorded:
    def __init__(self, method: str, path: str, headers: Any, body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.program: Any = None
        self.blobs: dict[str, bytes] = {}
        self.part_names: list[str] = []
        if method == "POST" and path.endswith("/execute"):
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body
            )
            assert msg.is_multipart()
            for part in msg.iter_parts():
                name = part.get_param("name", header="content-disposition")
                self.part_names.append(name)
                payload = part.get_payload(decode=True)
                if name == "program":
                    assert part.get_content_type() == "application/json"
                    self.program_raw = payload
                    self.program = json.loads(payload)
                else:
                    assert name.startswith("blob:")
                    assert part.get_content_type() == "application/octet-stream"
                    self.blobs[name[5:]] = payload


class _Server(ThreadingHTTPServer):
    request_queue_size = 512  # many clients connect at once in the map tests
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that cancelled hung up
            super().handle_error(request, client_address)


class FakeServer:
    """A real HTTP server on 127.0.0.1 that answers from a script and records requests."""

    def __init__(self, replies: list[Reply | Callable[[Recorded], Reply]] | Callable[[Recorded], Reply]) -> None:
        # A list answers requests in order; a callable answers every request.
        self.replies = replies if callable(replies) else list(replies)
        self.requests: list[Recorded] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms delayed-ACK wait

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                rec = Recorded(self.command, self.path, self.headers, body)
                outer.requests.append(rec)
                reply = outer.replies if callable(outer.replies) else outer.replies.pop(0)
                status, headers, payload = reply(rec) if callable(reply) else reply
                if status == HANG_UP[0]:
                    self.close_connection = True
                    return
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_POST = do_HEAD = _handle

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}/prefix/"

    def __enter__(self) -> FakeServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


class BlockingAsyncClient:
    """An AsyncClient behind Client's blocking interface: each call runs to its
    end on this wrapper's own event loop, so one test body checks both."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._loop = asyncio.new_event_loop()
        self.inner = AsyncClient(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if inspect.iscoroutinefunction(attr):
            return lambda *a, **k: self._loop.run_until_complete(attr(*a, **k))
        return attr

    def map(self, *args: Any, **kwargs: Any):
        iterator = self.inner.map(*args, **kwargs)  # argument errors raise here, as Client.map's do

        def items():
            try:
                while True:
                    try:
                        yield self._loop.run_until_complete(iterator.__anext__())
                    except StopAsyncIteration:
                        return
            finally:
                self._loop.run_until_complete(iterator.aclose())

        return items()

    def close(self) -> None:
        self._loop.run_until_complete(self.inner.aclose())
        self._loop.close()

    def __enter__(self) -> BlockingAsyncClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@pytest.fixture(params=["Client", "AsyncClient"])
def make_client(request):
    """Client, or AsyncClient made blocking: tests that take this run with both."""
    return Client if request.param == "Client" else BlockingAsyncClient
