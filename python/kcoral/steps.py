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

__all__ = ["Request", "Steps", "adrive", "drive"]

T = TypeVar("T")

#: An exchange: yields requests, is sent their responses, returns its value.
Steps = Generator["Request", httpx.Response, T]


@dataclass(frozen=True)
class Request:
    """One HTTP request of an exchange; ``path`` is relative to the base URL."""

    method: str
    path: str
    headers: Mapping[str, str] | None = None
    #: Body pieces (bytes-like, sent in order; blobs whole, as the caller's
    #: own objects: each client sends them as its transport copies least);
    #: None: no body.
    content: list[Any] | None = None


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
