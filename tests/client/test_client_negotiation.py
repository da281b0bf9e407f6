from __future__ import annotations

import email.parser
import email.policy
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from kcoral import Client, KCoralError, Program, ProtocolError, TransportError
from wire_helpers import multipart, outcome, sha, tensor_node

REQUEST_ID = "0b7e1f9a-4c39-4a8e-9d47-4d3c8e0a1b2c"

Reply = tuple[int, dict[str, str], bytes]


def json_reply(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    h = {"Content-Type": "application/json", "X-Request-ID": REQUEST_ID}
    h.update(headers or {})
    return status, h, json.dumps(body).encode()


def cache_miss(missing: list[str], node: str | None = None) -> Reply:
    return json_reply({"status": "CACHE_MISS", "request_id": REQUEST_ID, "missing_blobs": missing},
                      headers={"X-KCoral-Node": node} if node else None)


class Recorded:
    def __init__(self, method: str, path: str, headers: Any, body: bytes) -> None:
        self.method, self.path, self.headers, self.body = method, path, headers, body
        self.program: Any = None
        self.blobs: dict[str, bytes] = {}
        self.part_names: list[str] = []
        if method == "POST":
            msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
                b"Content-Type: " + headers["Content-Type"].encode() + b"\r\n\r\n" + body)
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


class FakeServer:
    """A real HTTP server on 127.0.0.1 that answers from a script and records requests."""

    def __init__(self, replies: list[Reply | Callable[[Recorded], Reply]]) -> None:
        self.replies = list(replies)
        self.requests: list[Recorded] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                rec = Recorded(self.command, self.path, self.headers, body)
                outer.requests.append(rec)
                reply = outer.replies.pop(0)
                status, headers, payload = reply(rec) if callable(reply) else reply
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
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


def make_program() -> tuple[Program, dict[str, bytes]]:
    p = Program()
    m = p.upload(id="m", kind="module", source="def main(*a):\n    return 1\n")
    f = p.get_function(id="f", module=m, name="main")
    a = p.upload(id="a", kind="bytes", value=b"alpha")
    b = p.upload(id="b", kind="library", value=b"beta-library")
    t = p.upload(id="t", kind="tensor", value=np.arange(4, dtype=np.float32))
    p.upload_file(id="file", blob=b"alpha", path="in/a.txt")  # same bytes as `a`: one blob
    r = p.run(id="r", fn=f, args=[a, b, t, "é"])
    p.return_(key="out", value=r)
    blobs = {sha(b"alpha"): b"alpha", sha(b"beta-library"): b"beta-library",
             sha(np.arange(4, dtype=np.float32).tobytes()): np.arange(4, dtype=np.float32).tobytes()}
    assert p._blobs == blobs
    return p, blobs


COMPLETED = json_reply(outcome(results={"out": {"type": "integer", "value": 1}}, request_id=REQUEST_ID))


def test_negotiation_sends_missing_blobs_then_completes():
    p, blobs = make_program()
    hashes = list(blobs)
    missing = [hashes[2], hashes[0]]
    with FakeServer([cache_miss(missing, node="node-7"), COMPLETED]) as srv:
        with Client(srv.url, headers={"Authorization": "Bearer t"}) as client:
            result = client.execute(p, timeout_seconds=30, gpu_count=2)
    assert result.completed and result["out"] == 1 and result.request_id == REQUEST_ID
    first, second = srv.requests
    for rec in (first, second):
        assert rec.method == "POST" and rec.path == "/prefix/execute"
        assert rec.headers["Authorization"] == "Bearer t"
        assert rec.part_names[0] == "program"
        assert rec.program == {"instructions": p.instructions, "options": {"timeout_seconds": 30, "gpu_count": 2}}
    # attempt 1: no blob parts, no node header
    assert first.part_names == ["program"] and first.blobs == {}
    assert "X-KCoral-Node" not in first.headers
    # attempt 2: exactly the missing blobs, node echoed
    assert second.part_names == ["program"] + [f"blob:{h}" for h in missing]
    assert second.blobs == {h: blobs[h] for h in missing}
    assert second.headers["X-KCoral-Node"] == "node-7"
    # compact JSON, non-ASCII kept, identical on every attempt
    assert first.program_raw == second.program_raw
    assert b", " not in first.program_raw and b'": ' not in first.program_raw
    assert "é".encode() in first.program_raw


def test_third_attempt_resends_everything_with_route_from_attempt_two():
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[1]], node="n1"), cache_miss([h[0]], node="n2"), COMPLETED]) as srv:
        with Client(srv.url) as client:
            assert client.execute(p).completed
    a1, a2, a3 = srv.requests
    assert a1.blobs == {} and a2.blobs == {h[1]: blobs[h[1]]}
    assert a3.blobs == blobs
    assert sorted(a3.part_names[1:]) == sorted(f"blob:{x}" for x in blobs)
    assert a2.headers["X-KCoral-Node"] == "n1" and a3.headers["X-KCoral-Node"] == "n2"
    assert "options" not in a1.program


def test_third_cache_miss_raises_protocol_error():
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[0]]), cache_miss([h[0]]), cache_miss([h[0]])]) as srv:
        with Client(srv.url) as client:
            with pytest.raises(ProtocolError, match="complete blob resend"):
                client.execute(p)
    assert len(srv.requests) == 3
    assert all("X-KCoral-Node" not in r.headers for r in srv.requests)


def test_no_node_header_without_valid_route():
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[0]], node="x" * 513), COMPLETED]) as srv:
        with Client(srv.url) as client:
            client.execute(p)
    assert "X-KCoral-Node" not in srv.requests[1].headers


@pytest.mark.parametrize(
    "missing",
    [[], ["zz"], ["A" * 64], [sha(b"not-local")], None],
)
def test_invalid_cache_miss_bodies(missing):
    p, blobs = make_program()
    if missing is None:
        h = list(blobs)[0]
        missing = [h, h]
    with FakeServer([cache_miss(missing)]) as srv:
        with Client(srv.url) as client:
            with pytest.raises(ProtocolError):
                client.execute(p)
    assert len(srv.requests) == 1


def test_multipart_cache_miss_rejected():
    p, blobs = make_program()
    ctype, raw = multipart({"status": "CACHE_MISS", "request_id": REQUEST_ID, "missing_blobs": [list(blobs)[0]]}, [])
    with FakeServer([(200, {"Content-Type": ctype}, raw)]) as srv:
        with Client(srv.url) as client:
            with pytest.raises(ProtocolError):
                client.execute(p)


def test_program_without_blobs_and_multipart_result():
    p = Program()
    m = p.upload(kind="module", source="x")
    p.return_(key="m", value=m)
    data = np.arange(3, dtype=np.int32).tobytes()
    body = outcome(results={"t": tensor_node("int32", [3], data, 0)})
    ctype, raw = multipart(body, [("return:0", data)])
    with FakeServer([(200, {"Content-Type": ctype}, raw)]) as srv:
        with Client(srv.url) as client:
            result = client.execute(p, output_limit_bytes=0)
    assert result["t"].tolist() == [0, 1, 2]
    assert srv.requests[0].program["options"] == {"output_limit_bytes": 0}


def test_lone_surrogates_and_big_ints_in_args_are_sent_as_python_json_reads_them():
    # A lone surrogate is a str Python allows but UTF-8 cannot carry: the program
    # carries its JSON escape (protocol §4.2). Integers keep every digit.
    args = ["\ud800 x \udfff", 2**200, -(2**65), {"\udc00": [2**70]}]
    p = Program()
    m = p.upload(kind="module", source="def main(*a):\n    return a\n")
    f = p.get_function(module=m, name="main")
    p.run(fn=f, args=args)
    body = outcome(results={"s": {"type": "string", "value": "\ud800"},
                            "i": {"type": "integer", "value": -(2**200)}})
    with FakeServer([json_reply(body)]) as srv:
        with Client(srv.url) as client:
            result = client.execute(p)
    raw = srv.requests[0].program_raw
    raw.decode("utf-8")  # valid UTF-8 on the wire
    assert b"\\ud800 x \\udfff" in raw and str(2**200).encode() in raw
    assert srv.requests[0].program["instructions"][2]["args"] == args
    assert result["s"] == "\ud800" and result["i"] == -(2**200)


def test_error_responses_raise_kcoral_error():
    p, _ = make_program()
    err = {"status": "ERROR", "request_id": "rid-1", "error": {"kind": "parse", "message": "instructions[0]: bad"}}
    with FakeServer([json_reply(err, status=400), (503, {"Content-Type": "text/plain", "Retry-After": "1",
                                                        "X-Request-ID": "rid-2"}, b"busy")]) as srv:
        with Client(srv.url) as client:
            with pytest.raises(KCoralError) as info:
                client.execute(p)
            assert info.value.status_code == 400 and info.value.kind == "parse"
            assert info.value.request_id == "rid-1"
            assert str(info.value) == "HTTP 400: instructions[0]: bad"
            with pytest.raises(KCoralError) as info:
                client.execute(p)
            assert str(info.value) == "HTTP 503: HTTP 503" and info.value.kind is None
            assert info.value.request_id == "rid-2"
    assert len(srv.requests) == 2  # no retry on 503


def test_execute_argument_checks():
    with Client("http://127.0.0.1:9") as client:
        with pytest.raises(TypeError):
            client.execute({"instructions": []})  # type: ignore[arg-type]
        for bad in (0, 9, True, 2.0):
            with pytest.raises(ValueError):
                client.execute(Program(), gpu_count=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            client.execute(Program(), timeout_seconds=float("nan"))


def test_transport_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with Client(f"http://127.0.0.1:{port}", connect_timeout_seconds=2) as client:
        p = Program()
        p.upload(kind="module", source="")
        with pytest.raises(TransportError):
            client.execute(p)
        with pytest.raises(TransportError):
            client.health()


def test_health_and_target():
    health = {"status": "ok", "instance_id": "i", "started_at": "2026-01-01T00:00:00Z", "gpu_count": 1,
              "load": {"request_capacity": 8, "requests_in_progress": 0, "requests_waiting": 0},
              "target": {"arch": "sm_90a"}, "versions": {"torch": "2.14"}, "extra": [1]}
    cpu = dict(health, target={}, gpu_count=0)
    with FakeServer([json_reply(health), json_reply(health), json_reply(cpu),
                     json_reply(dict(health, status="unavailable")),
                     json_reply({"status": "unavailable"}, status=503), json_reply([1])]) as srv:
        with Client(srv.url) as client:
            assert client.health() == health
            assert client.target() == {"arch": "sm_90a"}
            with pytest.raises(ProtocolError):
                client.target()
            with pytest.raises(ProtocolError):
                client.health()
            with pytest.raises(KCoralError) as info:
                client.health()
            assert info.value.status_code == 503
            with pytest.raises(ProtocolError):
                client.health()
    assert all(r.method == "GET" and r.path == "/prefix/health" for r in srv.requests)


def test_lazy_imports_in_worker_modules():
    import subprocess
    import sys

    code = ("import sys, kcoral.errors; from kcoral.errors import ExecutionError; "
            "e = ExecutionError('correctness', 'mismatch'); assert (e.kind, e.message) == ('correctness', 'mismatch'); "
            "assert 'httpx' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules); "
            "import kcoral; assert kcoral.__version__ == '0.1.0'; kcoral.KCoralError; "
            "assert 'httpx' not in sys.modules and 'numpy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
