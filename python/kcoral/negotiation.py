"""What a client says to a KCoral server: execute and health, as I/O-free
steps (steps.py) that Client and AsyncClient both drive (protocol §3.3, §5.1).

Every decision of an exchange lives here once: the argument checks, the blob
preflight (blob_preflight.py), the three-attempt CACHE_MISS negotiation and
the reading of answers.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterable
from typing import Any

import httpx

from .blob_preflight import BlobPreflight
from .errors import KCoralError, ProtocolError
from .program import Program
from .result import ProgramResult, decode_program_result, decode_response, parse_cache_miss, strict_json_loads
from .steps import Request, Steps

__all__ = [
    "IDEMPOTENCY_HEADER",
    "NODE_HEADER",
    "check_program",
    "execute_steps",
    "health_steps",
    "target_of",
    "wire_options",
]

NODE_HEADER = "X-KCoral-Node"
#: On every POST /execute of a call, retries on other nodes included (failover.py).
IDEMPOTENCY_HEADER = "Idempotency-Key"
_MAX_NODE_LEN = 512
_MAX_ATTEMPTS = 3


# ------------------------------------------------------------------ checks
_GPU_ARCH = re.compile(r"(sm|compute)_[0-9]{2,3}[af]?")


def check_program(program: object) -> Program:
    if not isinstance(program, Program):
        raise TypeError(f"program must be a kcoral.Program, not {type(program).__name__}")
    return program


def wire_options(
    *,
    timeout_seconds: float | None = None,
    gpu_count: int | None = None,
    output_limit_bytes: int | None = None,
    gpu_arch: str | None = None,
) -> dict[str, Any]:
    """The wire ``options`` of execute(); only the ones given (protocol §5.1). ``gpu_arch``
    ("sm_90a", as ``Client.target()`` names it) sends the program to GPUs of that
    architecture: in a cluster, to that pool; a server of another one refuses it."""
    if gpu_arch is not None and (not isinstance(gpu_arch, str) or not _GPU_ARCH.fullmatch(gpu_arch)):
        raise ValueError(f"gpu_arch must name an architecture such as 'sm_90a', got {gpu_arch!r}")
    if gpu_count is not None and (
        not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or not 1 <= gpu_count <= 8
    ):
        raise ValueError(f"gpu_count must be an int in 1..8, got {gpu_count!r}")
    options: dict[str, Any] = {}
    if timeout_seconds is not None:
        options["timeout_seconds"] = timeout_seconds
    if output_limit_bytes is not None:
        options["output_limit_bytes"] = output_limit_bytes
    if gpu_count is not None:
        options["gpu_count"] = gpu_count
    if gpu_arch is not None:
        options["gpu_arch"] = gpu_arch
    return options


# ---------------------------------------------------------------- exchanges
def execute_steps(
    program: Program, options: dict[str, Any], preflight: BlobPreflight, idempotency_key: str | None = None
) -> Steps[ProgramResult]:
    """``POST /execute`` with the blob negotiation of protocol §3.3, against
    one server (``preflight`` is that server's).

    Large blobs are first sent ahead where the server has blob endpoints
    (blob_preflight.py). Then the first attempt sends no blob (but those the
    server could not keep), the second the ones reported missing, the third
    all; a third CACHE_MISS is a ProtocolError. Each POST /execute carries
    ``idempotency_key`` when given: a cluster stores no CACHE_MISS under it
    (docs/cluster.md), so the negotiation's own attempts are no retries.
    """
    to_send = sorted((yield from preflight.settle(program)))
    program_json = _encode_program(program, options)
    local_blobs = dict(program._blobs)

    route: str | None = None
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        blobs = [(h, local_blobs[h]) for h in to_send]
        response = yield _execute_request(program_json, blobs, route, idempotency_key)
        if response.status_code != 200:
            raise _server_error(response)
        body, parts = decode_response(response.headers.get("Content-Type"), response.content)
        if body.get("status") != "CACHE_MISS":
            return decode_program_result(body, parts)
        if parts is not None:
            raise ProtocolError("a CACHE_MISS response must not be multipart")
        missing = parse_cache_miss(body)
        if attempt == _MAX_ATTEMPTS:
            break
        unknown = [digest for digest in missing if digest not in local_blobs]
        if unknown:
            raise ProtocolError(f"server misses blobs with no local bytes to send: {', '.join(unknown)}")
        route = _route(response)
        to_send = missing if attempt == 1 else list(local_blobs)
    raise ProtocolError("server still reports CACHE_MISS after a complete blob resend")


def health_steps() -> Steps[dict[str, Any]]:
    """``GET /health``; the body must be a JSON object with status ``ok``."""
    response = yield Request("GET", "/health")
    if response.status_code != 200:
        raise _server_error(response)
    body = strict_json_loads(response.content, "health body")
    if not isinstance(body, dict):
        raise ProtocolError("health body is not a JSON object")
    if body.get("status") != "ok":
        raise ProtocolError(f"server health status is {body.get('status')!r}")
    return body


def usage_steps() -> Steps[dict[str, Any]]:
    """``GET /usage`` (a key's tenant: its usage, limits and what remains in the window; an
    operator's key: everyone's too, under ``tenants``)."""
    response = yield Request("GET", "/usage")
    if response.status_code != 200:
        raise _server_error(response)
    body = strict_json_loads(response.content, "usage body")
    if not isinstance(body, dict) or not isinstance(body.get("usage"), dict):
        raise ProtocolError("usage body has no usage object")
    return body


def target_of(health: dict[str, Any]) -> dict[str, Any]:
    """The compile target in a health body, e.g. ``{"arch": "sm_90a"}``."""
    target = health.get("target")
    if not isinstance(target, dict) or "arch" not in target:
        raise ProtocolError("server health has no target.arch (is it a CPU server?)")
    return target


# ------------------------------------------------------------------ pieces
def _encode_program(program: Program, options: dict[str, Any]) -> bytes:
    envelope: dict[str, Any] = {"instructions": program.instructions}
    if options:
        envelope["options"] = options
    text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    # A lone surrogate (a str Python allows) is not UTF-8; inside a JSON string
    # its backslash escape "\\udXXX" is the same value (protocol §4.2).
    return text.encode("utf-8", "backslashreplace")


def _execute_request(
    program_json: bytes, blobs: list[tuple[str, bytes]], route: str | None, idempotency_key: str | None
) -> Request:
    boundary, chunks, length = _multipart(program_json, blobs)
    headers = {
        "Content-Type": f"multipart/form-data; boundary={boundary}",
        "Content-Length": str(length),
    }
    if route is not None:
        headers[NODE_HEADER] = route
    if idempotency_key is not None:
        headers[IDEMPOTENCY_HEADER] = idempotency_key
    return Request("POST", "/execute", headers, chunks)


def _multipart(program_json: bytes, blobs: Iterable[tuple[str, bytes]]) -> tuple[str, list[Any], int]:
    """Frame the request body; returns (boundary, chunks, total length)."""
    blobs = list(blobs)
    while True:
        boundary = "kcoral-" + secrets.token_hex(16)
        marker = boundary.encode("ascii")
        if marker not in program_json and not any(marker in data for _, data in blobs):
            break
    delim = b"--" + marker
    chunks: list[Any] = [
        delim,
        b'\r\nContent-Disposition: form-data; name="program"\r\nContent-Type: application/json\r\n\r\n',
        program_json,
    ]
    for digest, data in blobs:
        chunks.append(b"\r\n" + delim)
        chunks.append(
            b'\r\nContent-Disposition: form-data; name="blob:'
            + digest.encode("ascii")
            + b'"\r\nContent-Type: application/octet-stream\r\n\r\n'
        )
        chunks.append(data)
    chunks.append(b"\r\n" + delim + b"--\r\n")
    chunks = _coalesce(chunks)
    return boundary, chunks, sum(len(c) for c in chunks)


# Pieces below this size are joined with their neighbours: each piece is one
# send() (one segment on loopback); a program alone was four.
_JOIN_BELOW_BYTES = 64 << 10


def _coalesce(chunks: list[Any]) -> list[Any]:
    """Joins runs of small pieces; large ones (blobs) stay uncopied."""
    out: list[Any] = []
    run: list[Any] = []
    for chunk in chunks:
        if len(chunk) < _JOIN_BELOW_BYTES:
            run.append(chunk)
            continue
        if run:
            out.append(b"".join(run))
            run = []
        out.append(chunk)
    if run:
        out.append(b"".join(run))
    return out


def _server_error(response: httpx.Response) -> KCoralError:
    """Build a KCoralError from a non-200 response, parsing the body leniently."""
    code = response.status_code
    message = f"HTTP {code}"
    kind = None
    request_id = None
    try:
        body = json.loads(response.content)
    except (ValueError, UnicodeDecodeError):
        body = None
    if isinstance(body, dict):
        if isinstance(body.get("request_id"), str):
            request_id = body["request_id"]
        error = body.get("error")
        if isinstance(error, dict):
            if isinstance(error.get("message"), str):
                message = error["message"]
            if isinstance(error.get("kind"), str):
                kind = error["kind"]
    if request_id is None:
        request_id = response.headers.get("X-Request-ID")
    retry_after = response.headers.get("Retry-After")
    return KCoralError(code, message, kind=kind, request_id=request_id, retry_after=retry_after)


def _route(response: httpx.Response) -> str | None:
    values = response.headers.get_list(NODE_HEADER)
    if len(values) != 1:
        return None
    value = values[0]
    if not 1 <= len(value) <= _MAX_NODE_LEN:
        return None
    return value
