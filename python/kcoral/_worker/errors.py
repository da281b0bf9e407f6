"""How a failed instruction is described to the server (spec/protocol.md §4.4)."""

import traceback as traceback_module

from kcoral.errors import ExecutionError

TRACEBACK_LIMIT = 8192


class InstructionFailure(Exception):
    """Raised inside the engine to fail the current instruction with a kind."""

    def __init__(self, kind: str, message: str, extra: dict | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra or {}


def describe_exception(exc: BaseException) -> tuple[str, str, dict]:
    """(kind, message, extra keys) for an exception escaping an instruction."""
    if isinstance(exc, InstructionFailure):
        return exc.kind, exc.message, exc.extra
    if isinstance(exc, ExecutionError):
        return exc.kind, exc.message, {}
    return "engine", f"{type(exc).__name__}: {exc}", {}


def format_traceback(exc: BaseException) -> str:
    text = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))
    return text[-TRACEBACK_LIMIT:]
