"""How Client and AsyncClient connect: timeouts, pool limits, and pools in shards.

Both clients take the same defaults (protocol §5.1): only the connect phase
has a timeout (no read, write or pool timeout), since an evaluation holds its
request open until the server answers.

Pool size: one connection per request in flight, since HTTP/1.1 carries one
request at a time per connection. httpx's default pool (100 connections)
would queue request 101 and later inside the client, with no pool timeout,
so thousands of evaluations from one process would run 100 at a time while
the server's queue_ms showed no wait. So the pools are unbounded and the
caller bounds concurrency (map's `concurrency`; past its admission queue the
server answers 503 `busy`). Idle connections close after 5 s; their number is
not capped, because httpcore 1.0 compares that cap with *all* the
connections of a pool and so closes every idle one (and reconnects for each
request) whenever more than the cap are open. Each connection is a file
descriptor: thousands at once need `ulimit -n` above that.

Shards: httpcore's pool re-examines every connection it holds at each
request's start and end, and for each idle one counts all of them again, so
its CPU cost per request grows with the connections it holds. Against a
server that answers at once (one client process, 2000 requests), one pool
cost 2.8 ms of client CPU per request at 8 in flight, 8.8 ms at 64, 20 ms at
512 and 49 ms at 2000, where the client alone limited the rate to 20
requests/s. So each client's transport keeps several pools (shards) of at
most `SHARD_REQUESTS` requests in flight each: a request goes to the first
shard with room, and a new shard is made when none has. The shards share one
SSL context (one per shard would read the CA bundle each time, ~70 ms). A
shard lives as long as its client; its idle connections expire like others.

Thread-safety: ShardedTransport serves httpx.Client, whose requests may come
from many threads (Client.map); AsyncShardedTransport serves
httpx.AsyncClient, used from one event loop.
"""

from __future__ import annotations

import os
import ssl
import threading
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import httpx

__all__ = [
    "SHARD_REQUESTS",
    "AsyncShardedTransport",
    "ShardedTransport",
    "async_client_options",
    "client_options",
    "with_api_key",
]

#: Requests in flight per pool. Small enough that a pool's bookkeeping is cheap
#: (16 connections at most), large enough that few shards are needed.
SHARD_REQUESTS = 16

_POOL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=5.0)


def _timeout(connect_timeout_seconds: float) -> httpx.Timeout:
    return httpx.Timeout(None, connect=connect_timeout_seconds)


def with_api_key(headers: Mapping[str, str] | None, api_key: str | None) -> dict[str, str]:
    """`headers` plus the API key (else $KCORAL_API_KEY) as a bearer token, for a server
    started with --auth-keys; the key never goes into a URL."""
    key = api_key if api_key is not None else os.environ.get("KCORAL_API_KEY")
    out = dict(headers or {})
    if key:
        if not isinstance(key, str) or any(c.isspace() for c in key):
            raise ValueError("api_key must be a string without whitespace")
        out["Authorization"] = f"Bearer {key}"
    return out


def client_options(
    headers: Mapping[str, str] | None, connect_timeout_seconds: float, verify: ssl.SSLContext
) -> dict[str, Any]:
    """Keyword arguments for Client's httpx.Client; `verify` checks https servers (tls.py)."""
    return {
        "headers": dict(headers or {}),
        "timeout": _timeout(connect_timeout_seconds),
        "transport": ShardedTransport(limits=_POOL_LIMITS, verify=verify),
    }


def async_client_options(
    headers: Mapping[str, str] | None, connect_timeout_seconds: float, verify: ssl.SSLContext
) -> dict[str, Any]:
    """Keyword arguments for AsyncClient's httpx.AsyncClient: the same as Client's."""
    return {
        "headers": dict(headers or {}),
        "timeout": _timeout(connect_timeout_seconds),
        "transport": AsyncShardedTransport(limits=_POOL_LIMITS, verify=verify),
    }


class _Shard:
    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.active = 0  # requests sent and whose response is not closed yet


class ShardedTransport(httpx.BaseTransport):
    """httpx.HTTPTransport over shards; takes HTTPTransport's keywords."""

    def __init__(self, **transport_options: Any) -> None:
        self._options = dict(transport_options)
        self._options.setdefault("verify", httpx.create_ssl_context())
        self._shards: list[_Shard] = []
        self._lock = threading.Lock()  # guards _shards and every shard's `active`

    def _take(self) -> _Shard:
        with self._lock:
            shard = next((s for s in self._shards if s.active < SHARD_REQUESTS), None)
            if shard is None:
                shard = _Shard(httpx.HTTPTransport(**self._options))
                self._shards.append(shard)
            shard.active += 1
            return shard

    def _release(self, shard: _Shard) -> None:
        with self._lock:
            shard.active -= 1

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        shard = self._take()
        try:
            response = shard.transport.handle_request(request)
        except BaseException:
            self._release(shard)
            raise
        response.stream = _ReleasingStream(response.stream, lambda: self._release(shard))
        return response

    def close(self) -> None:
        with self._lock:
            shards, self._shards = self._shards, []
        for shard in shards:
            shard.transport.close()


class AsyncShardedTransport(httpx.AsyncBaseTransport):
    """httpx.AsyncHTTPTransport over shards; takes AsyncHTTPTransport's keywords."""

    def __init__(self, **transport_options: Any) -> None:
        self._options = dict(transport_options)
        self._options.setdefault("verify", httpx.create_ssl_context())
        self._shards: list[_Shard] = []

    def _take(self) -> _Shard:
        shard = next((s for s in self._shards if s.active < SHARD_REQUESTS), None)
        if shard is None:
            shard = _Shard(httpx.AsyncHTTPTransport(**self._options))
            self._shards.append(shard)
        shard.active += 1
        return shard

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        shard = self._take()
        try:
            response = await shard.transport.handle_async_request(request)
        except BaseException:
            shard.active -= 1
            raise
        response.stream = _AsyncReleasingStream(response.stream, shard)
        return response

    async def aclose(self) -> None:
        shards, self._shards = self._shards, []
        for shard in shards:
            await shard.transport.aclose()


class _ReleasingStream(httpx.SyncByteStream):
    """A response body that gives its shard's slot back when closed, once."""

    def __init__(self, stream: Any, release: Any) -> None:
        self._stream = stream
        self._release = release

    def __iter__(self) -> Iterator[bytes]:
        yield from self._stream

    def close(self) -> None:
        try:
            self._stream.close()
        finally:
            release, self._release = self._release, None
            if release is not None:
                release()


class _AsyncReleasingStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any, shard: _Shard | None) -> None:
        self._stream = stream
        self._shard = shard

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._stream:
            yield chunk

    async def aclose(self) -> None:
        try:
            await self._stream.aclose()
        finally:
            shard, self._shard = self._shard, None
            if shard is not None:
                shard.active -= 1
