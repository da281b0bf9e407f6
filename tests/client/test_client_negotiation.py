"""Client and AsyncClient against a scripted server: every case runs with both
(`make_client`), since both drive the same steps (negotiation.py)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from kcoral import KCoralError, Program, ProtocolError, TransportError
from kcoral.blob_names import LARGE_BLOB_BYTES
from wire_helpers import REQUEST_ID, FakeServer, Reply, cache_miss, json_reply, multipart, outcome, sha, tensor_node
from wire_helpers import make_client  # noqa: F401  (the fixture: each test runs with both clients)


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
    blobs = {
        sha(b"alpha"): b"alpha",
        sha(b"beta-library"): b"beta-library",
        sha(np.arange(4, dtype=np.float32).tobytes()): np.arange(4, dtype=np.float32).tobytes(),
    }
    assert p._blobs == blobs
    return p, blobs


COMPLETED = json_reply(outcome(results={"out": {"type": "integer", "value": 1}}, request_id=REQUEST_ID))


def test_negotiation_sends_missing_blobs_then_completes(make_client):
    p, blobs = make_program()
    hashes = list(blobs)
    missing = [hashes[2], hashes[0]]
    with FakeServer([cache_miss(missing, node="node-7"), COMPLETED]) as srv:
        with make_client(srv.url, headers={"Authorization": "Bearer t"}) as client:
            result = client.execute(p, timeout_seconds=30, gpu_count=2, gpu_arch="sm_90a")
    assert result.completed and result["out"] == 1 and result.request_id == REQUEST_ID
    first, second = srv.requests
    for rec in (first, second):
        assert rec.method == "POST" and rec.path == "/prefix/execute"
        assert rec.headers["Authorization"] == "Bearer t"
        assert rec.part_names[0] == "program"
        options = {"timeout_seconds": 30, "gpu_count": 2, "gpu_arch": "sm_90a"}
        assert rec.program == {"instructions": p.instructions, "options": options}
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


def test_third_attempt_resends_everything_with_route_from_attempt_two(make_client):
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[1]], node="n1"), cache_miss([h[0]], node="n2"), COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(p).completed
    a1, a2, a3 = srv.requests
    assert a1.blobs == {} and a2.blobs == {h[1]: blobs[h[1]]}
    assert a3.blobs == blobs
    assert sorted(a3.part_names[1:]) == sorted(f"blob:{x}" for x in blobs)
    assert a2.headers["X-KCoral-Node"] == "n1" and a3.headers["X-KCoral-Node"] == "n2"
    assert "options" not in a1.program


def test_third_cache_miss_raises_protocol_error(make_client):
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[0]]), cache_miss([h[0]]), cache_miss([h[0]])]) as srv:
        with make_client(srv.url) as client:
            with pytest.raises(ProtocolError, match="complete blob resend"):
                client.execute(p)
    assert len(srv.requests) == 3
    assert all("X-KCoral-Node" not in r.headers for r in srv.requests)


def test_no_node_header_without_valid_route(make_client):
    p, blobs = make_program()
    h = list(blobs)
    with FakeServer([cache_miss([h[0]], node="x" * 513), COMPLETED]) as srv:
        with make_client(srv.url) as client:
            client.execute(p)
    assert "X-KCoral-Node" not in srv.requests[1].headers


@pytest.mark.parametrize(
    "missing",
    [[], ["zz"], ["A" * 64], [sha(b"not-local")], None],
)
def test_invalid_cache_miss_bodies(missing, make_client):
    p, blobs = make_program()
    if missing is None:
        h = list(blobs)[0]
        missing = [h, h]
    with FakeServer([cache_miss(missing)]) as srv:
        with make_client(srv.url) as client:
            with pytest.raises(ProtocolError):
                client.execute(p)
    assert len(srv.requests) == 1


def test_multipart_cache_miss_rejected(make_client):
    p, blobs = make_program()
    ctype, raw = multipart({"status": "CACHE_MISS", "request_id": REQUEST_ID, "missing_blobs": [list(blobs)[0]]}, [])
    with FakeServer([(200, {"Content-Type": ctype}, raw)]) as srv:
        with make_client(srv.url) as client:
            with pytest.raises(ProtocolError):
                client.execute(p)


def test_program_without_blobs_and_multipart_result(make_client):
    p = Program()
    m = p.upload(kind="module", source="x")
    p.return_(key="m", value=m)
    data = np.arange(3, dtype=np.int32).tobytes()
    body = outcome(results={"t": tensor_node("int32", [3], data, 0)})
    ctype, raw = multipart(body, [("return:0", data)])
    with FakeServer([(200, {"Content-Type": ctype}, raw)]) as srv:
        with make_client(srv.url) as client:
            result = client.execute(p, output_limit_bytes=0)
    assert result["t"].tolist() == [0, 1, 2]
    assert srv.requests[0].program["options"] == {"output_limit_bytes": 0}


def test_lone_surrogates_and_big_ints_in_args_are_sent_as_python_json_reads_them(make_client):
    # A lone surrogate is a str Python allows but UTF-8 cannot carry: the program
    # carries its JSON escape (protocol §4.2). Integers keep every digit.
    args = ["\ud800 x \udfff", 2**200, -(2**65), {"\udc00": [2**70]}]
    p = Program()
    m = p.upload(kind="module", source="def main(*a):\n    return a\n")
    f = p.get_function(module=m, name="main")
    p.run(fn=f, args=args)
    body = outcome(results={"s": {"type": "string", "value": "\ud800"}, "i": {"type": "integer", "value": -(2**200)}})
    with FakeServer([json_reply(body)]) as srv:
        with make_client(srv.url) as client:
            result = client.execute(p)
    raw = srv.requests[0].program_raw
    raw.decode("utf-8")  # valid UTF-8 on the wire
    assert b"\\ud800 x \\udfff" in raw and str(2**200).encode() in raw
    assert srv.requests[0].program["instructions"][2]["args"] == args
    assert result["s"] == "\ud800" and result["i"] == -(2**200)


def test_error_responses_raise_kcoral_error(make_client):
    p, _ = make_program()
    err = {"status": "ERROR", "request_id": "rid-1", "error": {"kind": "parse", "message": "instructions[0]: bad"}}
    with FakeServer(
        [
            json_reply(err, status=400),
            (503, {"Content-Type": "text/plain", "Retry-After": "1", "X-Request-ID": "rid-2"}, b"busy"),
        ]
    ) as srv:
        with make_client(srv.url, max_attempts=1) as client:  # a 503 is retried otherwise (test_failover.py)
            with pytest.raises(KCoralError) as info:
                client.execute(p)
            assert info.value.status_code == 400 and info.value.kind == "parse"
            assert info.value.request_id == "rid-1"
            assert str(info.value) == "HTTP 400: instructions[0]: bad"
            with pytest.raises(KCoralError) as info:
                client.execute(p)
            assert str(info.value) == "HTTP 503: HTTP 503" and info.value.kind is None
            assert info.value.request_id == "rid-2"
    assert len(srv.requests) == 2


def test_execute_argument_checks(make_client):
    with make_client("http://127.0.0.1:9") as client:
        with pytest.raises(TypeError):
            client.execute({"instructions": []})  # type: ignore[arg-type]
        for bad in (0, 9, True, 2.0):
            with pytest.raises(ValueError):
                client.execute(Program(), gpu_count=bad)  # type: ignore[arg-type]
        for bad in ("hopper", "sm_9", 90, "gpu/sm_90a"):
            with pytest.raises(ValueError, match="gpu_arch"):
                client.execute(Program(), gpu_arch=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            client.execute(Program(), timeout_seconds=float("nan"))


def test_transport_error(make_client):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with make_client(f"http://127.0.0.1:{port}", connect_timeout_seconds=2) as client:
        p = Program()
        p.upload(kind="module", source="")
        with pytest.raises(TransportError):
            client.execute(p)
        with pytest.raises(TransportError):
            client.health()


def test_health_and_target(make_client):
    health = {
        "status": "ok",
        "instance_id": "i",
        "started_at": "2026-01-01T00:00:00Z",
        "gpu_count": 1,
        "load": {"request_capacity": 8, "requests_in_progress": 0, "requests_waiting": 0},
        "target": {"arch": "sm_90a"},
        "versions": {"torch": "2.14"},
        "extra": [1],
    }
    cpu = dict(health, target={}, gpu_count=0)
    with FakeServer(
        [
            json_reply(health),
            json_reply(health),
            json_reply(cpu),
            json_reply(dict(health, status="unavailable")),
            json_reply({"status": "unavailable"}, status=503),
            json_reply([1]),
        ]
    ) as srv:
        with make_client(srv.url) as client:
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


def large_program(data: bytes) -> Program:
    p = Program()
    d = p.upload(id="d", kind="bytes", value=data)
    m = p.upload(id="m", kind="module", source="def main(d):\n    return len(d)\n")
    p.return_(key="out", value=p.run(id="r", fn=p.get_function(id="f", module=m, name="main"), args=[d]))
    return p


def blob_reply(data: bytes, cached: bool = True, marker: str = "stored") -> Reply:
    return json_reply({"sha256": sha(data), "size": len(data), "cached": cached}, headers={"X-KCoral-Blob": marker})


def blob_lookup(present: bool) -> Reply:
    return 200 if present else 404, {"X-KCoral-Blob": "present" if present else "missing"}, b""


def test_a_large_blob_goes_ahead_and_the_program_alone(make_client):
    data = os.urandom(LARGE_BLOB_BYTES)  # new bytes: named by the server, not hashed here
    with FakeServer([blob_reply(data), COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(large_program(data)).completed
            assert client._preflights[client.base_url].supported is True
    upload, program = srv.requests
    assert (upload.method, upload.path) == ("POST", "/prefix/blobs") and upload.body == data
    assert "X-KCoral-Blob-SHA256" not in upload.headers
    assert program.part_names == ["program"] and program.program["instructions"][0]["blob"] == sha(data)


def test_a_blob_named_before_is_only_looked_up(make_client):
    data = os.urandom(LARGE_BLOB_BYTES)
    with FakeServer(
        [blob_reply(data), COMPLETED, blob_lookup(True), COMPLETED, blob_lookup(False), blob_reply(data), COMPLETED]
    ) as srv:
        with make_client(srv.url) as client:
            for _ in range(3):  # sent; then present; then evicted and sent again, claimed
                assert client.execute(large_program(data)).completed
    methods = [(r.method, r.path.replace("/prefix", "")) for r in srv.requests]
    assert methods == [
        ("POST", "/blobs"),
        ("POST", "/execute"),
        ("HEAD", f"/blobs/{sha(data)}"),
        ("POST", "/execute"),
        ("HEAD", f"/blobs/{sha(data)}"),
        ("POST", "/blobs"),
        ("POST", "/execute"),
    ]
    assert srv.requests[5].headers["X-KCoral-Blob-SHA256"] == sha(data)
    assert all(r.blobs == {} for r in srv.requests if r.path.endswith("/execute"))


def test_a_blob_the_server_cannot_keep_goes_with_its_program(make_client):
    data = os.urandom(LARGE_BLOB_BYTES)
    with FakeServer([blob_reply(data, cached=False), COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(large_program(data)).completed
    assert srv.requests[1].blobs == {sha(data): data}


def test_without_blob_endpoints_large_blobs_are_negotiated(make_client):
    first, second = os.urandom(LARGE_BLOB_BYTES), os.urandom(LARGE_BLOB_BYTES)
    no_endpoint = (404, {"Content-Type": "text/plain"}, b"not found")  # no X-KCoral-Blob: the reference
    with FakeServer([no_endpoint, cache_miss([sha(first)]), COMPLETED, cache_miss([sha(second)]), COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(large_program(first)).completed
            assert client._preflights[client.base_url].supported is False
            assert client.execute(large_program(second)).completed  # learned once: no POST /blobs now
    assert [(r.method, r.path) for r in srv.requests] == [("POST", "/prefix/blobs")] + [("POST", "/prefix/execute")] * 4
    assert [r.blobs for r in srv.requests[1:]] == [{}, {sha(first): first}, {}, {sha(second): second}]


def test_blob_endpoint_answers_that_break_the_protocol(make_client):
    data = os.urandom(LARGE_BLOB_BYTES)
    wrong_size = json_reply({"sha256": sha(data), "size": 1, "cached": True}, headers={"X-KCoral-Blob": "stored"})
    no_body = (200, {"X-KCoral-Blob": "stored"}, b"")
    for reply in (wrong_size, no_body):
        with FakeServer([reply]) as srv:
            with make_client(srv.url) as client:
                with pytest.raises(ProtocolError, match="POST /blobs"):
                    client.execute(large_program(data))


def test_lazy_imports_in_worker_modules():
    import subprocess
    import sys

    code = (
        "import sys, kcoral.errors; from kcoral.errors import ExecutionError; "
        "e = ExecutionError('correctness', 'mismatch'); assert (e.kind, e.message) == ('correctness', 'mismatch'); "
        "assert 'httpx' not in sys.modules and 'numpy' not in sys.modules, sorted(sys.modules); "
        "import kcoral; assert kcoral.__version__ == '0.1.0'; kcoral.KCoralError; "
        "assert 'httpx' not in sys.modules and 'numpy' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
