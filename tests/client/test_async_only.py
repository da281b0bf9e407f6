"""What only AsyncClient has: awaiting, `async with`, many requests gathered
at once, and cancellation (the cases shared with Client run with both in
test_client_negotiation.py and test_map.py). Not named
test_async_client.py: tests/e2e has that name, and `make e2e` collects both
folders in one run (no packages), where basenames must differ."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx

import kcoral
from kcoral import AsyncClient, Client, ProgramResult
from kcoral.connections import SHARD_REQUESTS
from test_map import Answers, indexed_program
from wire_helpers import FakeServer, json_reply, outcome


def test_exported_and_closed_by_async_with():
    assert kcoral.AsyncClient is AsyncClient
    health = {"status": "ok", "target": {"arch": "sm_90a"}}

    async def main():
        async with AsyncClient(srv.url) as client:
            assert repr(client) == f"AsyncClient({srv.url.rstrip('/')!r})" and client.base_url == srv.url.rstrip("/")
            assert await client.target() == {"arch": "sm_90a"}
        assert client._http.is_closed

    with FakeServer([json_reply(health)]) as srv:
        asyncio.run(main())


def test_same_connection_defaults_as_client():
    with Client("http://127.0.0.1:9", connect_timeout_seconds=3) as sync:
        blocking = sync._http.timeout
    client = AsyncClient("http://127.0.0.1:9", connect_timeout_seconds=3)
    assert client._http.timeout == blocking == httpx.Timeout(None, connect=3)
    asyncio.run(client.aclose())


def test_many_executes_gathered_are_all_in_flight_at_once():
    count = 150  # over httpx's default pool of 100; more makes this one-process test slow, not stronger
    barrier = threading.Barrier(count, timeout=20)

    def answer(rec):
        index = rec.program["instructions"][2]["args"][0]
        barrier.wait()  # every request is held until all have arrived
        return json_reply(outcome(results={"out": {"type": "integer", "value": index}}))

    async def main():
        async with AsyncClient(srv.url) as client:
            results = await asyncio.gather(*(client.execute(indexed_program(i)) for i in range(count)))
            shards = client._http._transport._shards  # connections.py: pools of SHARD_REQUESTS at most
            assert len(shards) == -(-count // SHARD_REQUESTS) and all(shard.active == 0 for shard in shards)
            return results

    with FakeServer(answer) as srv:
        results = asyncio.run(main())
    assert [r["out"] for r in results] == list(range(count))


def test_leaving_map_early_cancels_the_executions_in_flight():
    release = threading.Event()

    def answer(rec):
        index = rec.program["instructions"][2]["args"][0]
        if index:
            release.wait(10)
        return json_reply(outcome(results={"out": {"type": "integer", "value": index}}))

    async def main():
        async with AsyncClient(srv.url) as client:
            started = time.monotonic()
            async with contextlib.aclosing(client.map([indexed_program(i) for i in range(6)], concurrency=4)) as it:
                async for index, result in it:
                    assert (index, result["out"]) == (0, 0)
                    break
            assert time.monotonic() - started < 5  # did not wait for the held ones
            assert asyncio.all_tasks() == {asyncio.current_task()}

    with FakeServer(answer) as srv:
        try:
            asyncio.run(main())
        finally:
            release.set()
    # The rest were never started; the last of the four may have been
    # cancelled before its request reached the server.
    assert 1 <= len(srv.requests) <= 4


def test_execute_can_be_cancelled():
    release = threading.Event()

    async def main():
        async with AsyncClient(srv.url) as client:
            try:
                await asyncio.wait_for(client.execute(indexed_program(1)), 0.3)
            except asyncio.TimeoutError:
                return "cancelled"

    with FakeServer(lambda rec: (release.wait(10), json_reply(outcome()))[1]) as srv:
        try:
            assert asyncio.run(main()) == "cancelled"
        finally:
            release.set()


def test_map_is_an_async_iterator_of_index_and_outcome():
    async def main():
        async with AsyncClient(srv.url) as client:
            return [pair async for pair in client.map((indexed_program(i) for i in range(5)), concurrency=2)]

    with FakeServer(Answers()) as srv:
        pairs = asyncio.run(main())
    assert sorted(i for i, _ in pairs) == list(range(5))
    assert all(isinstance(r, ProgramResult) and r["out"] == i for i, r in pairs)
