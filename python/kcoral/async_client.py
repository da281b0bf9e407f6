"""Asynchronous HTTP client for a KCoral server (protocol §1, §3.3, §5.1).

AsyncClient is Client on ``httpx.AsyncClient``: the same methods, argument
checks, blob preflight, CACHE_MISS negotiation, entry nodes and retries
(failover.py) and errors, driven from the same I/O-free steps (steps.py,
negotiation.py). It suits thousands of
evaluations in flight from one process:

    async with kcoral.AsyncClient("http://127.0.0.1:8000") as client:
        results = await asyncio.gather(*(client.execute(p) for p in programs))
        # or, bounded, as they finish:
        async for index, outcome in client.map(programs, concurrency=64):
            ...

Its connections are not limited in number (connections.py says why, and how
they stay cheap by the thousand), so the caller bounds concurrency. The CPU
work of an exchange (encoding, framing, decoding results, hashing where a
server cannot name blobs) runs on the event loop; a result of hundreds of
MiB pauses the loop while it is checked.
execute(), health() and target() work under any loop httpx supports (the
retry backoff sleeps with anyio, as httpx does); map uses asyncio.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterable
from functools import partial
from typing import Any

import anyio
import httpx

from .connections import async_client_options
from .errors import KCoralError, TransportError
from . import grading
from .failover import EntryNodesClient, key_or_fresh, refuse_shared_key
from .mapping import Outcome, check_concurrency, map_tasks
from .negotiation import check_program, execute_steps, health_steps, target_of, usage_steps, wire_options
from .program import Program
from .result import ProgramResult
from .tls import transport_error
from .steps import Request, adrive

__all__ = ["AsyncClient"]


class AsyncClient(EntryNodesClient):
    """Asynchronous client of one KCoral server (or router), or of a
    cluster's entry nodes: ``AsyncClient(url)`` or ``AsyncClient(urls=[...])``,
    with Client's keywords, idempotency keys and retries (Client's docstring,
    failover.py).

    Only the connect phase has a timeout: an execution holds its HTTP request
    open until the server answers. Use ``async with`` or call ``aclose()``.
    https URLs are verified as Client's are (``ca``, tls.py).
    """

    def _open_http(
        self, headers: dict[str, str], connect_timeout_seconds: float, verify: ssl.SSLContext
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(**async_client_options(headers, connect_timeout_seconds, verify))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------------ http
    async def _send(self, url: str, request: Request) -> httpx.Response:
        content = None if request.content is None else _pieces(request.content)
        try:
            return await self._http.request(
                request.method, url + request.path, headers=request.headers, content=content
            )
        except httpx.HTTPError as exc:
            what = f"{request.method} {request.path}"
            raise transport_error(what, url, exc, self._trust) from exc

    async def health(self) -> dict[str, Any]:
        """``GET /health`` of the first URL that answers, as Client.health."""
        attempts = self._failover.sweep()
        while True:
            try:
                return await adrive(health_steps(), partial(self._send, attempts.url))
            except (TransportError, KCoralError) as error:
                attempts.retry_or_raise(error)

    async def usage(self) -> dict[str, Any]:
        """This key's usage and remaining budget, as Client.usage."""
        return await adrive(usage_steps(), partial(self._send, self._failover.url))

    async def target(self) -> dict[str, Any]:
        """The server's compile target from ``/health``, e.g. ``{"arch": "sm_90a"}``."""
        return target_of(await self.health())

    async def execute(
        self,
        program: Program,
        *,
        timeout_seconds: float | None = None,
        gpu_count: int | None = None,
        output_limit_bytes: int | None = None,
        idempotency_key: str | None = None,
        gpu_arch: str | None = None,
    ) -> ProgramResult:
        """Run ``program`` and return its COMPLETED or FAILED outcome, as
        Client.execute does (negotiation.py), with its idempotency key and
        retries (failover.py). Raises KCoralError (non-200), TransportError (no
        response) or ProtocolError (malformed response, or still missing after
        a full resend). Cancelling it closes the request's connection; the
        server then cancels the program."""
        check_program(program)
        options = wire_options(
            timeout_seconds=timeout_seconds,
            gpu_count=gpu_count,
            output_limit_bytes=output_limit_bytes,
            gpu_arch=gpu_arch,
        )
        key = key_or_fresh(idempotency_key)
        attempts = self._failover.attempts()
        while True:
            url = attempts.url
            try:
                steps = execute_steps(program, options, self._preflights[url], key)
                return await adrive(steps, partial(self._send, url))
            except (TransportError, KCoralError) as error:
                delay = attempts.retry_or_raise(error)
            await anyio.sleep(delay)

    async def grade(
        self,
        candidate: grading.Code,
        reference: grading.Code,
        make_inputs: grading.Code,
        cfg: dict[str, Any] | None = None,
        *,
        timeout_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Client.grade's three programs and verdict, awaited (docs/grading.md)."""
        steps = grading.grade_steps(candidate, reference, make_inputs, cfg)
        return await grading.adrive(steps, partial(self.execute, timeout_seconds=timeout_seconds))

    def map(
        self,
        programs: Iterable[Program],
        *,
        concurrency: int = 8,
        progress: bool | None = None,
        **execute_options: Any,
    ) -> AsyncIterator[tuple[int, Outcome]]:
        """Execute many programs, at most ``concurrency`` at once, and yield
        ``(index, outcome)`` as each finishes (not in input order); an async
        iterator, on asyncio.

        ``index`` is the program's position in ``programs``; ``outcome`` is its
        ProgramResult, or the exception execute() raised for it (KCoralError,
        TransportError, ...) as a value: a failed call loses no other result,
        and every index comes exactly once. ``execute_options`` are execute()'s
        keywords, checked here before anything runs, but ``idempotency_key``:
        each program gets a fresh key of its own. ``progress=None`` shows a
        tqdm bar when stderr is a terminal; True/False forces it. To stop
        early, close the iterator (``async with contextlib.aclosing(...)``):
        that cancels the executions in flight.

            async for index, outcome in client.map(programs, concurrency=64):
                if isinstance(outcome, Exception):
                    ...  # no answer for programs[index]
        """
        check_concurrency(concurrency)
        refuse_shared_key(execute_options)
        wire_options(**execute_options)  # a bad keyword raises here, before anything runs
        return map_tasks(self.execute, programs, concurrency, progress, execute_options)

    def __repr__(self) -> str:
        urls = self._failover.urls
        return f"AsyncClient({urls[0]!r})" if len(urls) == 1 else f"AsyncClient(urls={list(urls)!r})"


# A write the socket cannot take at once is kept by asyncio's transport, which
# before Python 3.12 copies the rest into its buffer: a blob sent whole would
# be copied almost whole, and held twice. Views of this size keep each copy
# small and in cache.
_SEND_PIECE_BYTES = 1 << 20


async def _pieces(pieces: list[Any]) -> AsyncIterator[Any]:
    """A request body for httpx.AsyncClient, which takes no sync iterables;
    large pieces go as views of 1 MiB (no copy). Content-Length is set by the
    steps, so the body is not chunked."""
    for piece in pieces:
        if len(piece) <= _SEND_PIECE_BYTES:
            yield piece
            continue
        view = memoryview(piece)
        for start in range(0, len(view), _SEND_PIECE_BYTES):
            yield view[start : start + _SEND_PIECE_BYTES]
