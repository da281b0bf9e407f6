"""HTTP client for a KCoral server (protocol §1, §3.3, §5.1)."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from functools import partial
from typing import Any

import httpx

from .connections import client_options
from .errors import KCoralError, TransportError
from . import grading
from .failover import EntryNodesClient, key_or_fresh, refuse_shared_key
from .mapping import Outcome, check_concurrency, map_threads
from .negotiation import check_program, execute_steps, health_steps, target_of, usage_steps, wire_options
from .program import Program
from .result import ProgramResult
from .tls import transport_error
from .steps import Request, drive

__all__ = ["Client"]


class Client(EntryNodesClient):
    """Synchronous client of one KCoral server (or router), or of a cluster's
    entry nodes:

        Client("http://gpu:8001")
        Client(urls=["http://n1:8001", "http://n2:8001", "http://n3:8001"])

    Each execute() carries an ``Idempotency-Key`` and is retried, whole and
    with that key, on the next URL (the same one for a single URL) when an
    attempt gets no response or a 502/503, up to ``max_attempts`` (default
    ``max(3, 2 * len(urls))``); failover.py has the rules. A cluster runs a
    retried program once; a single server ignores the key, so a retry after
    a connection broke mid-request may run it again. ``retries`` counts the
    retries made. Thread-safe.

    Only the connect phase has a timeout: an execution holds its HTTP request
    open until the server answers. An https URL's server is verified against
    ``ca`` (a PEM bundle), else ``$KCORAL_CA_BUNDLE``, else the default roots
    (tls.py); one that does not verify raises TransportError, saying so.
    ``api_key`` (else ``$KCORAL_API_KEY``) is sent as ``Authorization: Bearer``
    to a server started with ``--auth-keys``; it never goes into a URL.
    """

    def _open_http(
        self, headers: dict[str, str], connect_timeout_seconds: float, verify: ssl.SSLContext
    ) -> httpx.Client:
        return httpx.Client(**client_options(headers, connect_timeout_seconds, verify))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # ------------------------------------------------------------------ http
    def _send(self, url: str, request: Request) -> httpx.Response:
        # Blob pieces go whole: h11 frames an exact bytes object without a copy
        # and httpcore's blocking socket (no write timeout) sends it in one
        # send(), so a large upload costs the kernel's copy alone (a 256 MiB
        # blob: 58-60 ms of client CPU, against 121 ms in 1 MiB views, which
        # h11 joins into new bytes one by one; docs/data-path.md).
        try:
            return self._http.request(
                request.method, url + request.path, headers=request.headers, content=request.content
            )
        except httpx.HTTPError as exc:
            what = f"{request.method} {request.path}"
            raise transport_error(what, url, exc, self._trust) from exc

    def health(self) -> dict[str, Any]:
        """``GET /health`` of the first URL that answers, trying each in turn
        from the one in use (no response or 502/503: the next); the body must
        be a JSON object with status ``ok``."""
        attempts = self._failover.sweep()
        while True:
            try:
                return drive(health_steps(), partial(self._send, attempts.url))
            except (TransportError, KCoralError) as error:
                attempts.retry_or_raise(error)

    def usage(self) -> dict[str, Any]:
        """This key's usage and remaining budget (``GET /usage``; docs/deploy.md): ``usage`` is
        the caller's tenant, ``tenants`` everyone's when the key is an operator's."""
        return drive(usage_steps(), partial(self._send, self._failover.url))

    def target(self) -> dict[str, Any]:
        """The server's compile target from ``/health``, e.g. ``{"arch": "sm_90a"}``."""
        return target_of(self.health())

    def grade(
        self,
        candidate: grading.Code,
        reference: grading.Code,
        make_inputs: grading.Code,
        cfg: dict[str, Any] | None = None,
        *,
        timeout_seconds: float | None = None,
    ) -> dict[str, Any]:
        """Grade ``candidate`` against ``reference`` on inputs it never saw (docs/grading.md).

        Three programs, each in a worker of its own: a reference worker draws input sets from
        seeds it never reveals (``make_inputs(seed, shape)``, for the declared sizes and each of
        cfg ``shapes``); the candidate's worker runs the candidate on them and times it beside
        the reference; a second reference worker recomputes the reference and compares. Returns
        the verdict: correct, per_input, speedup with its 95% interval, significant, trusted,
        reasons, conditions, integrity {candidate, reference}, lease_ms, and error (the phase
        that failed). cfg: shapes, seeds (2 per shape; normal, uniform and large values rotate), reference_dtype ("float64"), tolerance
        ({rtol, atol}), plausible_speedup (10), and the benchmark's warmup_ms/repeat_ms.
        ``timeout_seconds`` applies to each program."""
        steps = grading.grade_steps(candidate, reference, make_inputs, cfg)
        return grading.drive(steps, partial(self.execute, timeout_seconds=timeout_seconds))

    def execute(
        self,
        program: Program,
        *,
        timeout_seconds: float | None = None,
        gpu_count: int | None = None,
        output_limit_bytes: int | None = None,
        idempotency_key: str | None = None,
        gpu_arch: str | None = None,
    ) -> ProgramResult:
        """Run ``program`` and return its COMPLETED or FAILED outcome.

        Large blobs are sent ahead where the server has blob endpoints
        (blob_preflight.py). Then blob bytes are negotiated with the server
        cache: the first attempt sends none (but those the server could not
        keep), the second the ones reported missing, the third all
        (negotiation.py, shared with AsyncClient).

        Every attempt carries the header ``Idempotency-Key: idempotency_key``
        (1..200 characters of ``A-Za-z0-9._:-``; default: a fresh random
        key). No response or a 502/503 retries the whole exchange on the next
        URL with the same key (class docstring, failover.py).
        Raises KCoralError (non-200), TransportError (no response) or
        ProtocolError (malformed response, or still missing after a full
        resend); once the attempts are spent, the last error, saying how many
        were made and on which URLs.
        """
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
                return drive(steps, partial(self._send, url))
            except (TransportError, KCoralError) as error:
                delay = attempts.retry_or_raise(error)
            time.sleep(delay)

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
        keywords, checked here before anything runs, but ``idempotency_key``:
        each program gets a fresh key of its own, and a failed attempt is
        retried as execute() does. ``progress=None`` shows a tqdm bar when
        stderr is a terminal; True/False forces it. Runs on threads
        (mapping.py says why); for thousands at once, use AsyncClient.map.

            for index, outcome in client.map(programs, concurrency=16, timeout_seconds=60):
                if isinstance(outcome, Exception):
                    ...  # no answer for programs[index]
        """
        check_concurrency(concurrency)
        refuse_shared_key(execute_options)
        wire_options(**execute_options)  # a bad keyword raises here, before anything runs
        return map_threads(self.execute, programs, concurrency, progress, execute_options)

    def __repr__(self) -> str:
        urls = self._failover.urls
        return f"Client({urls[0]!r})" if len(urls) == 1 else f"Client(urls={list(urls)!r})"

    def function(self, *, timeout=None, output_limit_bytes=None, cpu_only=False):
        """Decorator: ``@client.function(timeout=60)`` on a plain ``def`` makes
        a RemoteFunction that runs locally when called and on this server
        through ``.remote()`` / ``.execute()`` (protocol §5.6,
        kcoral/remote_function.py). ``timeout`` (seconds) and
        ``output_limit_bytes`` become the execute options; ``cpu_only``
        marks the call as not touching the GPU."""
        from .remote_function import function_decorator

        return function_decorator(self, timeout=timeout, output_limit_bytes=output_limit_bytes, cpu_only=cpu_only)
