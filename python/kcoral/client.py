"""HTTP client for a KCoral server (protocol §1, §3.3, §5.1)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import httpx

from .blob_preflight import BlobPreflight
from .connections import client_options
from .mapping import Outcome, check_concurrency, map_threads
from .negotiation import check_program, execute_steps, health_steps, target_of, wire_options
from .program import Program
from .result import ProgramResult
from .tls import transport_error, trust
from .steps import Request, drive

__all__ = ["Client"]


class Client:
    """Synchronous client of one KCoral server (or router).

    Only the connect phase has a timeout: an execution holds its HTTP request
    open until the server answers. An https URL's server is verified against
    ``ca`` (a PEM bundle), else ``$KCORAL_CA_BUNDLE``, else the default roots
    (tls.py); one that does not verify raises TransportError, saying so.
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
        self._http = httpx.Client(**client_options(headers, connect_timeout_seconds, self._trust.context))
        self._preflight = BlobPreflight()

    @property
    def base_url(self) -> str:
        return self._base_url

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ http
    def _send(self, request: Request) -> httpx.Response:
        # Blob pieces go whole: h11 frames an exact bytes object without a copy
        # and httpcore's blocking socket (no write timeout) sends it in one
        # send(), so a large upload costs the kernel's copy alone (a 256 MiB
        # blob: 58-60 ms of client CPU, against 121 ms in 1 MiB views, which
        # h11 joins into new bytes one by one; docs/data-path.md).
        try:
            return self._http.request(
                request.method, self._base_url + request.path, headers=request.headers, content=request.content
            )
        except httpx.HTTPError as exc:
            what = f"{request.method} {request.path}"
            raise transport_error(what, self._base_url, exc, self._trust) from exc

    def health(self) -> dict[str, Any]:
        """``GET /health``; the body must be a JSON object with status ``ok``."""
        return drive(health_steps(), self._send)

    def target(self) -> dict[str, Any]:
        """The server's compile target from ``/health``, e.g. ``{"arch": "sm_90a"}``."""
        return target_of(self.health())

    def execute(
        self,
        program: Program,
        *,
        timeout_seconds: float | None = None,
        gpu_count: int | None = None,
        output_limit_bytes: int | None = None,
    ) -> ProgramResult:
        """Run ``program`` and return its COMPLETED or FAILED outcome.

        Large blobs are sent ahead where the server has blob endpoints
        (blob_preflight.py). Then blob bytes are negotiated with the server
        cache: the first attempt sends none (but those the server could not
        keep), the second the ones reported missing, the third all
        (negotiation.py, shared with AsyncClient).
        Raises KCoralError (non-200), TransportError (no response) or
        ProtocolError (malformed response, or still missing after a full resend).
        """
        check_program(program)
        options = wire_options(
            timeout_seconds=timeout_seconds, gpu_count=gpu_count, output_limit_bytes=output_limit_bytes
        )
        return drive(execute_steps(program, options, self._preflight), self._send)

    def map(
        self,
        programs: Iterable[Program],
        *,
        concurrency: int = 8,
        progress: bool | None = None,
        **execute_options: Any,
    ) -> Iterator[tuple[int, Outcome]]:
        """Execute many programs, at most ``concurrency`` at once, and yield
        ``(index, outcome)`` as each finishes (not in input order).

        ``index`` is the program's position in ``programs``; ``outcome`` is its
        ProgramResult, or the exception execute() raised for it (KCoralError,
        TransportError, ...) as a value: a failed call loses no other result,
        and every index comes exactly once. ``execute_options`` are execute()'s
        keywords, checked here before anything runs. ``progress=None`` shows a
        tqdm bar when stderr is a terminal; True/False forces it. Runs on
        threads (mapping.py says why); for thousands at once, use
        AsyncClient.map.

            for index, outcome in client.map(programs, concurrency=16, timeout_seconds=60):
                if isinstance(outcome, Exception):
                    ...  # no answer for programs[index]
        """
        check_concurrency(concurrency)
        wire_options(**execute_options)  # a bad keyword raises here, before anything runs
        return map_threads(self.execute, programs, concurrency, progress, execute_options)

    def __repr__(self) -> str:
        return f"Client({self._base_url!r})"

    def function(self, *, timeout=None, output_limit_bytes=None, cpu_only=False):
        """Decorator: ``@client.function(timeout=60)`` on a plain ``def`` makes
        a RemoteFunction that runs locally when called and on this server
        through ``.remote()`` / ``.execute()`` (protocol §5.6,
        kcoral/remote_function.py). ``timeout`` (seconds) and
        ``output_limit_bytes`` become the execute options; ``cpu_only``
        marks the call as not touching the GPU."""
        from .remote_function import function_decorator

        return function_decorator(self, timeout=timeout, output_limit_bytes=output_limit_bytes, cpu_only=cpu_only)
