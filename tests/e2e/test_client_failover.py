"""Client and AsyncClient fail over between entry nodes (python/kcoral/failover.py):
a dead node first in the list, a real CPU server after it. The server is not in
a cluster, so it takes the Idempotency-Key and ignores it; the scripted cases
(hang-ups, 503, 409, the key on every attempt) are in tests/client/test_failover.py."""

import asyncio

from conftest import call

ADD = "def main(a, b):\n    return a + b\n"


def test_client_fails_over_from_a_dead_node(shared_server, dead_url):
    from kcoral import Client

    with Client(urls=[dead_url, shared_server.url]) as client:
        result = client.execute(call(ADD, [2, 3]), timeout_seconds=30)
        assert result.completed, result.error
        assert result.results["out"] == 5
        assert client.retries == 1 and client.base_url == shared_server.url
        assert client.health()["status"] == "ok"


def test_async_client_fails_over_from_a_dead_node(shared_server, dead_url):
    from kcoral import AsyncClient

    async def main():
        async with AsyncClient(urls=[dead_url, shared_server.url]) as client:
            result = await client.execute(call(ADD, [4, 5]), timeout_seconds=30)
            assert result.completed, result.error
            assert result.results["out"] == 9
            assert client.retries == 1 and client.base_url == shared_server.url
            assert (await client.health())["status"] == "ok"

    asyncio.run(main())
