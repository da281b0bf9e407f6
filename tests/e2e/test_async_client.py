"""AsyncClient and map against a real server (issue 12): many executions at
once, the blob negotiation with large uploads, map's bound and order, and a
failed call that loses no other result."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from conftest import call
from wire import sha

MIB = 1 << 20

SLEEPS = "import time\ndef main(i, seconds):\n    start = time.time()\n    time.sleep(seconds)\n    return [i, start, time.time()]\n"
LENGTH = "import hashlib\ndef main(data):\n    return [len(data), hashlib.sha256(data).hexdigest()]\n"


def run_map(kind: str, url: str, programs: list, **options) -> list:
    """The (index, outcome) pairs of Client.map or AsyncClient.map, in the order yielded."""
    from kcoral import AsyncClient, Client

    if kind == "Client":
        with Client(url) as client:
            return list(client.map(programs, **options))

    async def main():
        async with AsyncClient(url) as client:
            return [pair async for pair in client.map(programs, **options)]

    return asyncio.run(main())


def most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_many_concurrent_executes(shared_server):
    from kcoral import AsyncClient

    count = 120  # thirty per seat of the shared server, all sent at once

    async def main():
        async with AsyncClient(shared_server.url) as client:
            assert (await client.health())["status"] == "ok"
            return await asyncio.gather(
                *(client.execute(call("def main(i):\n    return i * i\n", [i])) for i in range(count))
            )

    results = asyncio.run(main())
    assert [r.results["out"] for r in results] == [i * i for i in range(count)]
    assert len({r.request_id for r in results}) == count
    assert max(r.queue_ms for r in results) > 0  # they waited in the server's queue, not in the client


def test_large_uploads_negotiated_or_sent_ahead(shared_server):
    """Three ways a large bytes upload reaches the server through AsyncClient:
    below the preflight size it goes through CACHE_MISS; above it, POST /blobs
    then the program alone; and as against a server without blob endpoints
    (the reference), hashed here and sent through CACHE_MISS."""
    from kcoral import AsyncClient, Program

    def program(data: bytes) -> Program:
        p = Program()
        d = p.upload(kind="bytes", value=data)
        m = p.upload(kind="module", source=LENGTH)
        p.return_(key="out", value=p.run(fn=p.get_function(module=m, name="main"), args=[d]))
        return p

    async def main():
        sent = []

        async def record(request):
            sent.append((request.method, request.url.path, int(request.headers.get("Content-Length", 0))))

        async def execute(client, data):
            sent.clear()
            result = await client.execute(program(data), timeout_seconds=30)
            assert result.completed, result.error
            assert result.results["out"] == [len(data), sha(data)]
            return list(sent)

        async with AsyncClient(shared_server.url) as client:
            client._http.event_hooks["request"].append(record)
            medium = os.urandom(MIB - 1)
            first, second = await execute(client, medium)
            assert (first[1], second[1]) == ("/execute", "/execute") and second[2] - first[2] >= len(medium)
            large = os.urandom(24 * MIB)
            assert [(m, p) for m, p, _ in await execute(client, large)] == [("POST", "/blobs"), ("POST", "/execute")]
            assert [(m, p) for m, p, _ in await execute(client, large)] == [
                ("HEAD", f"/blobs/{sha(large)}"),
                ("POST", "/execute"),
            ]  # named once, then only asked for

            client._preflights[client.base_url].supported = False  # as against the reference server
            other = os.urandom(24 * MIB)
            first, second = await execute(client, other)
            assert (first[1], second[1]) == ("/execute", "/execute") and second[2] - first[2] >= len(other)

    asyncio.run(main())


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_map_bounds_concurrency_and_yields_as_they_finish(shared_server, kind):
    # The shared server has four seats; map may use two.
    delays = [0.6] + [0.05] * 9
    programs = [call(SLEEPS, [i, seconds]) for i, seconds in enumerate(delays)]
    pairs = run_map(kind, shared_server.url, programs, concurrency=2, timeout_seconds=30)
    assert sorted(i for i, _ in pairs) == list(range(len(delays)))
    outs = {i: r.results["out"] for i, r in pairs}
    assert all(outs[i][0] == i for i in outs)
    assert most_at_once([(start, end) for _, start, end in outs.values()]) == 2
    order = [i for i, _ in pairs]
    assert order.index(0) >= 3, order  # the slow one came late; the others did not wait for it


@pytest.mark.parametrize("kind", ["Client", "AsyncClient"])
def test_map_a_failing_request_does_not_lose_the_others(shared_server, kind):
    from kcoral import KCoralError

    programs = [call("def main(i):\n    return i\n", [i]) for i in range(6)]
    programs[2].instructions[0]["unknown_field"] = True  # the server answers 400
    programs[4] = call("def main(i):\n    raise ValueError('four')\n", [4])  # FAILED: a result, not an error
    started = time.monotonic()
    outcomes = dict(run_map(kind, shared_server.url, programs, concurrency=3))
    assert time.monotonic() - started < 10
    assert sorted(outcomes) == list(range(6))
    assert isinstance(outcomes[2], KCoralError) and outcomes[2].status_code == 400 and outcomes[2].kind == "parse"
    assert outcomes[4].status == "FAILED" and "four" in outcomes[4].error["message"]
    assert [outcomes[i].results["out"] for i in (0, 1, 3, 5)] == [0, 1, 3, 5]


def test_target_of_a_cpu_server_is_a_protocol_error(shared_server):
    from kcoral import AsyncClient, ProtocolError

    async def main():
        async with AsyncClient(shared_server.url) as client:
            with pytest.raises(ProtocolError, match="target.arch"):
                await client.target()

    asyncio.run(main())
