"""Exception types of the KCoral client and of uploaded code.

This module is imported inside workers (``from kcoral.errors import
ExecutionError``), so it must stay free of heavy imports: standard library
only, no numpy, no httpx.
"""

from __future__ import annotations

__all__ = [
    "EXECUTION_ERROR_KINDS",
    "ExecutionError",
    "KCoralError",
    "ProtocolError",
    "RemoteExecutionError",
    "TransportError",
]

#: Instruction error kinds that may appear in a FAILED outcome (protocol §4.4).
EXECUTION_ERROR_KINDS = frozenset(
    {
        "parse",
        "compile",
        "runtime",
        "gpu_access",
        "correctness",
        "serialization",
        "unavailable",
        "engine",
    }
)


class KCoralError(Exception):
    """The server answered ``/execute`` or ``/health`` with a non-200 status.

    ``kind`` and ``request_id`` come from the ``ERROR`` body when it has them;
    ``retry_after`` is the response's ``Retry-After`` header as sent (seconds,
    on a 429 quota or a 503), None without one.
    """

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        kind: str | None = None,
        request_id: str | None = None,
        retry_after: str | None = None,
    ) -> None:
        super().__init__(status_code, message)
        self.status_code = status_code
        self.message = message
        self.kind = kind
        self.request_id = request_id
        self.retry_after = retry_after

    def __str__(self) -> str:
        return f"HTTP {self.status_code}: {self.message}"

    def __reduce__(self):  # keep kind, request_id and retry_after when pickled
        return (
            _rebuild_kcoral_error,
            (type(self), self.status_code, self.message, self.kind, self.request_id, self.retry_after),
        )

    def __repr__(self) -> str:
        return (
            f"KCoralError(status_code={self.status_code!r}, message={self.message!r}, "
            f"kind={self.kind!r}, request_id={self.request_id!r})"
        )


def _rebuild_kcoral_error(cls, status_code, message, kind, request_id, retry_after=None):
    return cls(status_code, message, kind=kind, request_id=request_id, retry_after=retry_after)


class TransportError(Exception):
    """No HTTP response was received; the program may or may not have run."""


class ProtocolError(Exception):
    """The server's response violates the KCoral protocol."""


class RemoteExecutionError(RuntimeError):
    """A remote program did not complete; ``result`` is its ``ProgramResult``."""

    def __init__(self, result: object, message: str | None = None) -> None:
        if message is None:
            error = getattr(result, "error", None)
            status = getattr(result, "status", None)
            if isinstance(error, dict):
                message = f"{status}: {error.get('kind')}: {error.get('message')}"
            else:
                message = f"remote execution did not complete (status {status!r})"
        super().__init__(message)
        self.result = result


class ExecutionError(Exception):
    """Raised by server runtime code or by uploaded code to fail an instruction
    with a specific error ``kind`` (one of :data:`EXECUTION_ERROR_KINDS`)."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in EXECUTION_ERROR_KINDS:
            raise ValueError(
                f"invalid execution error kind {kind!r}; expected one of " + ", ".join(sorted(EXECUTION_ERROR_KINDS))
            )
        if not isinstance(message, str):
            message = str(message)
        super().__init__(kind, message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"

    def __reduce__(self):  # picklable across worker process boundaries
        return (type(self), (self.kind, self.message))
