"""A concurrent burst against a dedicated four-seat server."""

from __future__ import annotations

import concurrent.futures
import time

import httpx

from kcoral import Client, Program

BURST = 50
SOURCE = "def main(i):\n    return {'i': i, 'square': i * i}\n"


def one(url: str, i: int):
    program = Program()
    module = program.upload(id="m", kind="module", source=SOURCE)
    data = program.upload(id="d", kind="bytes", value=f"payload {i}".encode())
    fn = program.get_function(id="f", module=module, name="main")
    out = program.run(id="r", fn=fn, args=[i])
    program.return_(key="out", value=out)
    program.return_(key="data", value=data)
    with Client(url) as c:
        return c.execute(program, timeout_seconds=30)


def test_fifty_way_burst(make_server):
    server = make_server("--num-workers", "4")
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(BURST) as pool:
        futures = [pool.submit(one, server.url, i) for i in range(BURST)]
        results = [f.result(timeout=60) for f in futures]
    elapsed = time.monotonic() - start
    assert elapsed < 45, elapsed

    assert all(r.status == "COMPLETED" for r in results), [r.error for r in results if r.error]
    for i, result in enumerate(results):
        assert result["out"]["i"] == i and result["out"]["square"] == i * i
        assert result["data"] == f"payload {i}".encode()
    assert len({r.request_id for r in results}) == BURST
    # Default max_requests_per_worker=1: every request ran in a fresh worker process. Host pids
    # come from the server's request_routed events: inside the sandbox every worker has the same pid.
    deadline = time.monotonic() + 10
    while len(routed := {e["request_id"]: e["pid"] for e in server.events() if e["event"] == "request_routed"}) < BURST:
        assert time.monotonic() < deadline, len(routed)
        time.sleep(0.05)
    assert len({routed[r.request_id] for r in results}) == BURST

    deadline = time.monotonic() + 15
    while True:
        health = httpx.get(server.url + "/health", timeout=5).json()
        load = health["load"]
        if (load["requests_in_progress"], load["requests_waiting"], load["request_capacity"]) == (0, 0, 4):
            break
        assert time.monotonic() < deadline, load
        time.sleep(0.05)
    assert health["status"] == "ok"
