"""Exchanges as I/O-free steps, and the two ways to drive them.

An exchange with a server (execute, health: negotiation.py; the blob
preflight: blob_preflight.py) is a generator of *steps*: it yields each HTTP
request it wants sent (a `Request`), is sent back the `httpx.Response`, and
returns the exchange's value. It does no I/O itself, so the blocking Client
and the AsyncClient run the same code and differ only in how a request
travels:

    result = drive(execute_steps(program, options, preflight), client._send)         # Client
    result = await adrive(execute_steps(program, options, preflight), client._send)  # AsyncClient

An error the sender raises (TransportError) ends the exchange; errors the
steps raise (KCoralError, ProtocolError, ValueError) come out unchanged. The
steps do their CPU work (JSON, multipart framing, decoding, hashing where a
server cannot name blobs) in the caller's thread: in AsyncClient, on the
event loop.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx

__all__ = ["Request", "Steps", "adrive", "drive", "http_client_options"]

T = TypeVar("T")

#: An exchange: yields requests, is sent their responses, returns its value.
Steps = Generator["Request", httpx.Response, T]

# One connection per request in flight: HTTP/1.1 carries one request at a
# time per connection, and an evaluation holds its request open until it ends.
# httpx's default pool (100 connections) would queue request 101 and later
# inside the client, with no pool timeout, so thousands of evaluations from
# one process would run 100 at a time while the server's queue_ms showed no
# wait. So the pool is unbounded and the caller bounds concurrency (map's
# `concurrency`; the server answers 503 `busy` past its admission queue).
# After a burst at most 256 idle connections are kept, for 5 s; in steady use
# a connection is idle only between one request and the next. Each open
# connection is a file descriptor: thousands at once need `ulimit -n` above.
_POOL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=256, keepalive_expiry=5.0)


@dataclass(frozen=True)
class Request:
    """One HTTP request of an exchange; ``path`` is relative to the base URL."""

    method: str
    path: str
    headers: Mapping[str, str] | None = None
    #: Body pieces (bytes or memoryviews, sent in order); None: no body.
    content: list[Any] | None = None


def http_client_options(headers: Mapping[str, str] | None, connect_timeout_seconds: float) -> dict[str, Any]:
    """Keyword arguments for httpx.Client and httpx.AsyncClient alike (protocol
    §5.1): only the connect phase has a timeout (no read, write or pool
    timeout), and the pool takes any number of connections (_POOL_LIMITS)."""
    return {
        "headers": dict(headers or {}),
        "timeout": httpx.Timeout(None, connect=connect_timeout_seconds),
        "limits": _POOL_LIMITS,
    }


def drive(steps: Steps[T], send: Callable[[Request], httpx.Response]) -> T:
    """Runs an exchange with a blocking ``send``."""
    try:
        request = next(steps)
        while True:
            request = steps.send(send(request))
    except StopIteration as done:
        return done.value
    finally:
        steps.close()


async def adrive(steps: Steps[T], send: Callable[[Request], Awaitable[httpx.Response]]) -> T:
    """Runs an exchange with an awaitable ``send``."""
    try:
        request = next(steps)
        while True:
            request = steps.send(await send(request))
    except StopIteration as done:
        return done.value
    finally:
        steps.close()
