"""How a failed instruction is described to the server (spec/protocol.md §4.4).

Describing an error must never fail: user code may raise an exception whose
``__str__`` or ``__repr__`` raises or returns a non-string, or an
``ExecutionError`` whose attributes it changed after construction. Whatever
it raised, the instruction fails with a well-formed error object.
"""

import traceback as traceback_module

from kcoral.errors import EXECUTION_ERROR_KINDS, ExecutionError

TRACEBACK_LIMIT = 8192


class InstructionFailure(Exception):
    """Raised inside the engine to fail the current instruction with a kind."""

    def __init__(self, kind: str, message: str, extra: dict | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra or {}


def safe_text(obj) -> str:
    """str(obj), else repr(obj), else a placeholder naming the type; never raises."""
    for render in (str, repr):
        try:
            text = render(obj)
        except BaseException:  # noqa: BLE001 - user __str__ may raise anything
            continue
        if type(text) is str:  # str() refuses non-strings; a str subclass could misbehave
            return text
        try:
            return str.__str__(text)
        except BaseException:  # noqa: BLE001
            continue
    return f"<{type_name(obj)} object: str() and repr() failed>"


def type_name(obj) -> str:
    try:
        name = type(obj).__name__
        if type(name) is str:
            return name
    except BaseException:  # noqa: BLE001 - a metaclass may define __name__
        pass
    return "object"


def describe_exception(exc: BaseException) -> tuple[str, str, dict]:
    """(kind, message, extra keys) for an exception escaping an instruction."""
    if isinstance(exc, InstructionFailure):
        return exc.kind, exc.message, exc.extra
    if isinstance(exc, ExecutionError):
        kind = getattr(exc, "kind", None)
        message = getattr(exc, "message", None)
        if type(kind) is str and kind in EXECUTION_ERROR_KINDS:
            message = message if type(message) is str else safe_text(message)
            extra = {}
            if kind == "gpu_access":
                # Raised by uploaded code, not by the cpu_only guard: the kind
                # still needs its three keys (§4.4); the server fills in the last.
                extra = {"cuda_call": "", "location": "", "interfered_request_id": None}
            return kind, message, extra
    return "engine", f"{type_name(exc)}: {safe_text(exc)}", {}


def format_traceback(exc: BaseException) -> str:
    try:
        text = "".join(traceback_module.format_exception(type(exc), exc, exc.__traceback__))
    except BaseException:  # noqa: BLE001 - the traceback module calls user code too
        text = f"{type_name(exc)}: {safe_text(exc)}\n(the traceback could not be formatted)\n"
    return text[-TRACEBACK_LIMIT:]
