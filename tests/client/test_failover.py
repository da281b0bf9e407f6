"""Entry nodes, retries and idempotency keys (python/kcoral/failover.py)
against scripted servers on loopback; every case runs with Client and
AsyncClient (`make_client`). One FakeServer stands for several nodes: each
URL is its own path prefix, so the recorded paths say which node was asked."""

from __future__ import annotations

import os
import re
import threading
import time

import pytest

from kcoral import KCoralError, Program, ProtocolError, TransportError
from kcoral.blob_names import LARGE_BLOB_BYTES
from kcoral.failover import Failover
from wire_helpers import HANG_UP, FakeServer, json_reply, outcome, sha
from wire_helpers import make_client  # noqa: F401  (the fixture: each test runs with both clients)

COMPLETED = json_reply(outcome(results={"out": {"type": "integer", "value": 1}}))
BUSY = json_reply({"status": "ERROR", "error": {"kind": "busy", "message": "server saturated"}}, status=503)
BAD_GATEWAY = (502, {"Content-Type": "text/plain"}, b"bad gateway")
KEY = "Idempotency-Key"


def program(source: str = "def main():\n    return 1\n") -> Program:
    p = Program()
    m = p.upload(id="m", kind="module", source=source)
    p.return_(key="out", value=p.run(id="r", fn=p.get_function(id="f", module=m, name="main"), args=[]))
    return p


def nodes(srv: FakeServer, *names: str) -> list[str]:
    return [srv.url + name for name in names]


def asked(srv: FakeServer) -> list[str]:
    """The node (path prefix) of each recorded request."""
    return [r.path.split("/")[2] for r in srv.requests]


def test_a_failed_attempt_goes_to_the_next_url_with_the_same_key(make_client):
    # A node closes the connection without answering, the next is busy, the third bad gateway.
    with FakeServer([HANG_UP, BUSY, BAD_GATEWAY, COMPLETED, COMPLETED]) as srv:
        urls = nodes(srv, "a", "b", "c")
        with make_client(urls=urls) as client:
            started = time.monotonic()
            assert client.execute(program())["out"] == 1
            assert time.monotonic() - started >= 0.1 + 0.2 + 0.4  # the backoff doubles
            assert client.retries == 3
            assert client.base_url == urls[0]  # moved past a, b and c: round-robin back to a
            assert client.execute(program()).completed
            assert client.retries == 3
    assert asked(srv) == ["a", "b", "c", "a", "a"]
    keys = [r.headers[KEY] for r in srv.requests]
    assert len(set(keys[:4])) == 1 and re.fullmatch(r"[0-9a-f]{32}", keys[0])
    assert keys[4] != keys[0]  # a new call, a new key


def test_the_next_call_starts_at_the_url_in_use(make_client, dead_url):
    with FakeServer([COMPLETED, COMPLETED]) as srv:
        urls = [dead_url, *nodes(srv, "b")]
        with make_client(urls=urls) as client:
            assert client.urls == tuple(urls) and client.base_url == dead_url
            assert client.execute(program()).completed
            assert client.base_url == urls[1] and client.retries == 1
            assert client.execute(program()).completed
            assert client.retries == 1  # the dead node is not asked again
    assert asked(srv) == ["b", "b"]


def test_the_backoff_doubles_up_to_two_seconds():
    attempts = Failover(["http://a", "http://b"], max_attempts=9).attempts()
    delays = [attempts.retry_or_raise(TransportError("reset")) for _ in range(8)]
    assert delays == [0.1, 0.2, 0.4, 0.8, 1.6, 2.0, 2.0, 2.0]
    with pytest.raises(TransportError, match="after 9 attempts"):
        attempts.retry_or_raise(TransportError("reset"))


def test_a_single_url_is_retried_too(make_client):
    with FakeServer([BUSY, HANG_UP, COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(program()).completed
            assert client.retries == 2
    assert len(srv.requests) == 3 and len({r.headers[KEY] for r in srv.requests}) == 1


def test_spent_attempts_raise_the_last_error_saying_where(make_client):
    with FakeServer([HANG_UP, BUSY, HANG_UP, HANG_UP, HANG_UP, BUSY]) as srv:
        a, b = nodes(srv, "a", "b")
        with make_client(urls=[a, b], max_attempts=3) as client:
            with pytest.raises(TransportError) as info:
                client.execute(program())
            assert f"after 3 attempts, on {a}, {b}, {a}" in str(info.value)
            with pytest.raises(KCoralError) as info:
                client.execute(program())  # starts at b: a failed last
            error = info.value
            assert (error.status_code, error.kind) == (503, "busy")
            assert error.message == f"server saturated (after 3 attempts, on {b}, {a}, {b})"
            assert client.retries == 4
    assert asked(srv) == ["a", "b", "a", "b", "a", "b"]


def error_reply(status: int, kind: str) -> tuple:
    return json_reply({"status": "ERROR", "error": {"kind": kind, "message": f"a {status}"}}, status=status)


RUNTIME_ERROR = {
    "kind": "runtime",
    "message": "boom",
    "instruction_index": 2,
    "instruction_op": "run",
    "instruction_id": "r",
    "traceback": "",
}
FINAL = {  # an answer, and what execute() raises for it (None: it returns the FAILED result)
    "409": (error_reply(409, "conflict"), KCoralError),  # the key with another program
    "400": (error_reply(400, "parse"), KCoralError),
    "429": (error_reply(429, "quota"), KCoralError),
    "500": (error_reply(500, "internal"), KCoralError),
    "FAILED": (json_reply(outcome(status="FAILED", error=RUNTIME_ERROR)), None),
    "malformed": ((200, {"Content-Type": "application/json"}, b"not json"), ProtocolError),
}


@pytest.mark.parametrize("name", list(FINAL))
def test_final_answers_are_not_retried(make_client, name):
    answer, raised = FINAL[name]
    with FakeServer([answer]) as srv:
        with make_client(urls=nodes(srv, "a", "b")) as client:
            if raised is None:
                assert client.execute(program()).status == "FAILED"
            else:
                with pytest.raises(raised) as info:
                    client.execute(program())
                assert "attempts" not in str(info.value)
            assert client.retries == 0
    assert asked(srv) == ["a"]


def test_a_key_given_is_sent_and_checked(make_client):
    longest = "x" * 200
    with FakeServer([HANG_UP, COMPLETED, COMPLETED]) as srv:
        with make_client(srv.url) as client:
            assert client.execute(program(), idempotency_key="job-7:run_2.b").completed
            assert client.execute(program(), idempotency_key=longest).completed
            for bad in ("", "x" * 201, "has space", "é", "a\n", 7):
                with pytest.raises(ValueError, match="idempotency_key"):
                    client.execute(program(), idempotency_key=bad)
            with pytest.raises(TypeError, match="idempotency_key"):
                client.map([program()], idempotency_key="k")  # one key for many programs: refused
    assert [r.headers[KEY] for r in srv.requests] == ["job-7:run_2.b", "job-7:run_2.b", longest]


def test_constructor_argument_errors(make_client):
    for kwargs in ({}, {"base_url": "http://a", "urls": ["http://b"]}):
        with pytest.raises(ValueError, match="base_url.*urls"):
            make_client(**kwargs)
    for urls in ([], "http://a", ["http://a", ""], [1]):
        with pytest.raises(ValueError, match="urls"):
            make_client(urls=urls)
    with pytest.raises(ValueError, match="base_url"):
        make_client("")
    for bad in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="max_attempts"):
            make_client("http://a", max_attempts=bad)
    with make_client(urls=("http://a/", "http://b", "http://c")) as client:
        assert client.urls == ("http://a", "http://b", "http://c") and client.base_url == "http://a"
        assert client._failover.max_attempts == 6  # max(3, 2 per URL)
    with make_client("http://a/") as client:
        assert client.urls == ("http://a",) and client._failover.max_attempts == 3


def test_blob_endpoint_knowledge_is_per_url(make_client):
    data = os.urandom(LARGE_BLOB_BYTES)
    no_endpoint = (404, {"Content-Type": "text/plain"}, b"not found")  # node a is like the reference

    def answer(request):
        node, path = asked_one(request)
        if node == "a":
            return no_endpoint if path == "blobs" else BUSY
        if request.method == "HEAD":
            return 404, {"X-KCoral-Blob": "missing"}, b""
        if path == "blobs":
            return json_reply({"sha256": sha(data), "size": len(data), "cached": True}, headers={"X-KCoral-Blob": "s"})
        return COMPLETED

    with FakeServer(answer) as srv:
        a, b = nodes(srv, "a", "b")
        with make_client(urls=[a, b]) as client:
            assert client.execute(large_program(data)).completed
            assert client._preflights[a].supported is False and client._preflights[b].supported is True
    assert [(r.method, r.path.split("/", 3)[3]) for r in srv.requests] == [
        ("POST", "blobs"),
        ("POST", "execute"),  # 503: on to b, where the blob goes ahead after all
        ("HEAD", f"blobs/{sha(data)}"),
        ("POST", "blobs"),
        ("POST", "execute"),
    ]
    assert srv.requests[1].headers[KEY] == srv.requests[4].headers[KEY]


def asked_one(request) -> tuple[str, str]:
    _, _, node, *rest = request.path.split("/")
    return node, rest[0]


def large_program(data: bytes) -> Program:
    p = Program()
    d = p.upload(id="d", kind="bytes", value=data)
    m = p.upload(id="m", kind="module", source="def main(d):\n    return len(d)\n")
    p.return_(key="out", value=p.run(id="r", fn=p.get_function(id="f", module=m, name="main"), args=[d]))
    return p


def test_health_tries_each_url_once_in_turn(make_client, dead_url):
    health = {"status": "ok", "target": {"arch": "sm_90a"}}
    with FakeServer([BUSY, json_reply(health), HANG_UP, BUSY]) as srv:
        b, c = nodes(srv, "b", "c")
        with make_client(urls=[dead_url, b, c]) as client:
            assert client.target() == {"arch": "sm_90a"}  # dead, then busy, then c answers
            assert client.base_url == c and client.retries == 0
            with pytest.raises(KCoralError) as info:
                client.health()  # c hangs up, the dead one refuses, b is busy: each once
            assert info.value.status_code == 503 and f"after 3 attempts, on {c}, {dead_url}, {b}" in str(info.value)
    assert asked(srv) == ["b", "c", "c", "b"]


def test_map_gives_each_program_its_key_and_counts_retries_across_threads(make_client):
    seen: dict[str, int] = {}
    lock = threading.Lock()

    def first_hangs_up(request):  # every program's first attempt breaks
        with lock:
            count = seen[request.headers[KEY]] = seen.get(request.headers[KEY], 0) + 1
        return HANG_UP if count == 1 else COMPLETED

    with FakeServer(first_hangs_up) as srv:
        with make_client(urls=nodes(srv, "a", "b")) as client:
            outcomes = dict(client.map([program() for _ in range(12)], concurrency=6, progress=False))
            assert all(o.completed for o in outcomes.values()) and len(outcomes) == 12
            assert client.retries == 12
    assert len(seen) == 12 and set(seen.values()) == {2}
