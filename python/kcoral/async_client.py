"""Asynchronous HTTP client for a KCoral server (protocol §1, §3.3, §5.1).

AsyncClient is Client on ``httpx.AsyncClient``: the same methods, argument
checks, blob preflight, CACHE_MISS negotiation and errors, driven from the
same I/O-free steps (steps.py, negotiation.py). It suits thousands of
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
execute(), health() and target() work under any loop httpx supports; map
uses asyncio.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

import httpx

from .blob_preflight import BlobPreflight
from .connections import async_client_options
from .mapping import Outcome, check_concurrency, map_tasks
from .negotiation import check_program, execute_steps, health_steps, target_of, wire_options
from .program import Program
from .result import ProgramResult
from .tls import transport_error, trust
from .steps import Request, adrive

__all__ = ["AsyncClient"]


class AsyncClient:
    """Asynchronous client of one KCoral server (or router).

    Only the connect phase has a timeout: an execution holds its HTTP request
    open until the server answers. Use ``async with`` or call ``aclose()``.
    https URLs are verified as Client's are (``ca``, tls.py).
    """

    def __init__(
        self,
        base_url: str,
        *,
        headers: Mapping[str, str] | None = None,
        connect_timeout_seconds: float = 10.0,
        ca: str | os.PathLike[str] | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url:
            raise ValueError("base_url must be a non-empty string")
        self._base_url = base_url.rstrip("/")
        self._trust = trust(ca)  # https: ca, else $KCORAL_CA_BUNDLE, else the default roots
        self._http = httpx.AsyncClient(**async_client_options(headers, connect_timeout_seconds, self._trust.context))
        self._preflight = BlobPreflight()

    @property
    def base_url(self) -> str:
        return self._base_url

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # ------------------------------------------------------------------ http
    async def _send(self, request: Request) -> httpx.Response:
        content = None if request.content is None else _pieces(request.content)
        try:
            return await self._http.request(
                request.method, self._base_url + request.path, headers=request.headers, content=content
            )
        except httpx.HTTPError as exc:
            what = f"{request.method} {request.path}"
            raise transport_error(what, self._base_url, exc, self._trust) from exc

    async def health(self) -> dict[str, Any]:
        """``GET /health``; the body must be a JSON object with status ``ok``."""
        return await adrive(health_steps(), self._send)

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
    ) -> ProgramResult:
        """Run ``program`` and return its COMPLETED or FAILED outcome, as
        Client.execute does (negotiation.py). Raises KCoralError (non-200),
        TransportError (no response) or ProtocolError (malformed response, or
        still missing after a full resend). Cancelling it closes the request's
        connection; the server then cancels the program."""
        check_program(program)
        options = wire_options(
            timeout_seconds=timeout_seconds, gpu_count=gpu_count, output_limit_bytes=output_limit_bytes
        )
        return await adrive(execute_steps(program, options, self._preflight), self._send)

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
        keywords, checked here before anything runs. ``progress=None`` shows a
        tqdm bar when stderr is a terminal; True/False forces it. To stop
        early, close the iterator (``async with contextlib.aclosing(...)``):
        that cancels the executions in flight.

            async for index, outcome in client.map(programs, concurrency=64):
                if isinstance(outcome, Exception):
                    ...  # no answer for programs[index]
        """
        check_concurrency(concurrency)
        wire_options(**execute_options)  # a bad keyword raises here, before anything runs
        return map_tasks(self.execute, programs, concurrency, progress, execute_options)

    def __repr__(self) -> str:
        return f"AsyncClient({self._base_url!r})"


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
