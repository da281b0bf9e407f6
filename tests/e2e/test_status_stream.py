"""GET /api/status/stream (issue 28): the dashboard's status pushed once per build as
server-sent events, from a thread of the server's own (server/status_streams.h), gzip-encoded
for a client that accepts it (httpx here; the raw sockets ask for none). A viewer gets
the newest build at once and then each new one; one that hangs up is forgotten at once; keys
apply as to GET /api/status, and a reload of the keys ends every stream so each is admitted
again; 256 streams at most, then a 503 that says to poll. Over HTTPS the route answers 501
(test_tls.py)."""

from __future__ import annotations

import json
import signal
import socket
import time

import httpx
import pytest

from conftest import Server, call, wait_for, write_tenant_keys

from kcoral import Client
from kcoral.keys import key_line

ADD = "def main(a, b):\n    return a + b\n"


def events(url: str, count: int, headers: dict | None = None) -> list[tuple[float, dict]]:
    """The first `count` events of one stream, with the seconds since it was opened."""
    got = []
    opened = time.monotonic()
    with httpx.stream("GET", url + "/api/status/stream", headers=headers or {}, timeout=10) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"] == "text/event-stream"
        assert response.headers["cache-control"] == "no-store"
        assert response.headers["content-encoding"] == "gzip"  # httpx accepts it; raw sockets below do not
        for line in response.iter_lines():
            if line.startswith("data: "):
                got.append((time.monotonic() - opened, json.loads(line[len("data: ") :])))
                if len(got) == count:
                    return got
    raise AssertionError(f"the stream ended after {len(got)} events")


def stream_viewers(url: str, headers: dict | None = None) -> int:
    return httpx.get(url + "/api/status", headers=headers or {}, timeout=10).json()["stream_viewers"]


@pytest.mark.serial  # the first event within 1 s, then one every 0.9 to 2.5 s
def test_a_viewer_gets_the_newest_build_at_once_then_each_new_one(make_server):
    server = make_server("--num-workers", "1")
    with Client(server.url) as client:
        ran = client.execute(call(ADD, [2, 3])).request_id
    got = events(server.url, 3)
    first_at, first = got[0]
    assert first_at < 1.0, "the first event waits for no build"
    assert ran in {r["request_id"] for r in first["requests"]}
    assert first["stream_viewers"] == 1 and first["viewer"]["role"] == "open"
    builds = [status["snapshot_builds"] for _, status in got]
    stamps = [status["generated_unix_ms"] for _, status in got]
    assert builds == sorted(set(builds)), "each event is a new build"
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert all(900 <= gap <= 2500 for gap in gaps), gaps
    # Hung up: forgotten at once, not at the next write (the next build shows none).
    assert wait_for(lambda: stream_viewers(server.url) == 0, 5, "the stream to be forgotten")


def test_viewers_share_builds_and_polling_still_works(make_server):
    server = make_server("--num-workers", "1")
    sockets = [open_stream(server.port) for _ in range(8)]
    try:
        assert wait_for(lambda: stream_viewers(server.url) == 8, 5, "eight viewers")
        before = httpx.get(server.url + "/api/status", timeout=10).json()["snapshot_builds"]
        time.sleep(3)
        after = httpx.get(server.url + "/api/status", timeout=10).json()["snapshot_builds"]
        assert after - before <= 5, "eight viewers share one build a second"
        for s in sockets:
            s.settimeout(5)
            assert b"data: " in read_some(s)
    finally:
        for s in sockets:
            s.close()


def open_stream(port: int, key: str | None = None) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    s.sendall(f"GET /api/status/stream HTTP/1.1\r\nHost: x\r\n{auth}\r\n".encode())
    return s


def read_some(s: socket.socket, at_least: int = 4096) -> bytes:
    got = b""
    while len(got) < at_least:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        got += chunk
    return got


def test_the_257th_stream_is_told_to_poll(make_server):
    server = make_server("--num-workers", "1")
    sockets = []
    try:
        for _ in range(256):
            sockets.append(open_stream(server.port))
        assert wait_for(lambda: stream_viewers(server.url) == 256, 10, "256 streams")
        refused = httpx.get(server.url + "/api/status/stream", timeout=10)
        assert refused.status_code == 503
        assert "poll GET /api/status" in refused.json()["error"]["message"]
        assert refused.headers["retry-after"]
    finally:
        for s in sockets:
            s.close()
    assert wait_for(lambda: stream_viewers(server.url) == 0, 5, "every stream forgotten")
    assert events(server.url, 1), "a stream is served again"


@pytest.fixture
def keyed(tmp_path):
    path = tmp_path / "keys.txt"
    keys = write_tenant_keys(path)
    server = Server(tmp_path, "--auth-keys", str(path), "--num-workers", "1")
    yield server, keys, path
    server.stop()


def test_keys_apply_and_a_reload_ends_every_stream(keyed):
    server, keys, path = keyed
    bearer = {name: {"Authorization": f"Bearer {key}"} for name, key in keys.items()}
    assert httpx.get(server.url + "/api/status/stream", timeout=10).status_code == 401
    assert httpx.get(server.url + "/api/status/stream", headers={"Authorization": "Bearer nope"}).status_code == 401
    ran = {}
    for name in ("alice", "bob"):
        with Client(server.url, api_key=keys[name]) as client:
            ran[name] = client.execute(call(ADD, [1, 1])).request_id
    [(_, mine)] = events(server.url, 1, bearer["alice"])
    assert {r["request_id"] for r in mine["requests"]} == {ran["alice"]}
    assert mine["viewer"] == {"role": "tenant", "tenant": "alice"}
    [(_, everything)] = events(server.url, 1, bearer["ops"])
    assert {r["request_id"] for r in everything["requests"]} == set(ran.values())

    # Bob's key is revoked: the reload ends his stream, and he is refused when he comes back.
    bob = open_stream(server.port, keys["bob"])
    bob.settimeout(10)
    assert b"data: " in read_some(bob, 16)
    path.write_text("\n".join([key_line("alice", keys["alice"]), key_line("ops", keys["ops"], "operator")]) + "\n")
    server.process.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while bob.recv(1 << 16):  # events until the stream ends
        assert time.monotonic() < deadline, "the reload did not end the stream"
    bob.close()
    assert httpx.get(server.url + "/api/status/stream", headers=bearer["bob"], timeout=10).status_code == 401
