"""Encodes Python values into raw value nodes (spec/protocol.md §4.2).

Binary data (bytes, tensors, files) becomes a segment; its node carries the
segment's index as "part". The server checks every node, numbers the parts
"return:<k>" and computes the sha256 (src/protocol/value_codec.h), so nothing
here is trusted by the server.
"""

import math

from kcoral._worker.errors import InstructionFailure

# Python ints are arbitrary precision on the wire (§4.2); the server keeps their
# digits. Python itself refuses to print or read one longer than this
# (sys.int_info.default_max_str_digits), so the reference client could not
# decode it, and the server refuses it too (src/protocol/json_reader.h).
MAX_INTEGER_DIGITS = 4300
_INTEGER_BOUND = 10**MAX_INTEGER_DIGITS
_SAFE_INTEGER_BITS = 14284  # 2**14284 < 10**4300: anything shorter needs no digit count

# Nesting of returned containers. Each level is two JSON levels in the outcome,
# which the C encoder walks under the interpreter's recursion limit (1000 by
# default), so deeper values could not be encoded at all; Python's own
# recursion limit stops _encode near here anyway.
MAX_DEPTH = 480


class SegmentBudget:
    """Binary segments of one response and the bytes still allowed."""

    def __init__(self, max_bytes: int):
        self.segments: list = []
        self.max_bytes = max_bytes
        self.used = 0

    def checkpoint(self) -> tuple[int, int]:
        return len(self.segments), self.used

    def rollback(self, mark: tuple[int, int]) -> None:
        del self.segments[mark[0] :]
        self.used = mark[1]

    def add(self, data) -> int:
        size = memoryview(data).nbytes
        if self.max_bytes and self.used + size > self.max_bytes:
            raise InstructionFailure(
                "serialization",
                f"returned data exceeds the response budget of {self.max_bytes} bytes",
            )
        self.used += size
        self.segments.append(data)
        return len(self.segments) - 1


def encode_value(value, budget: SegmentBudget, export_tensor) -> dict:
    """Encodes `value`; on failure the caller rolls the budget back."""
    try:
        return _encode(value, budget, export_tensor, set(), 0)
    except RecursionError:
        raise InstructionFailure("serialization", "returned value nests too deeply") from None


def _encode(value, budget, export_tensor, active: set, depth: int) -> dict:
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean", "value": value}
    if isinstance(value, int):
        value = int(value)  # an int subclass (IntEnum, ...) is written as the plain int
        if value.bit_length() > _SAFE_INTEGER_BITS and abs(value) >= _INTEGER_BOUND:
            raise InstructionFailure(
                "serialization", f"cannot return an integer of more than {MAX_INTEGER_DIGITS} digits"
            )
        return {"type": "integer", "value": value}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InstructionFailure("serialization", f"cannot return non-finite number {value!r}")
        return {"type": "number", "value": float(value)}
    if isinstance(value, str):
        return {"type": "string", "value": str.__str__(value)}  # a subclass's __str__ is not asked
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"type": "bytes", "part": budget.add(bytes(value))}
    if isinstance(value, (list, tuple, dict)):
        if depth >= MAX_DEPTH:
            raise InstructionFailure("serialization", f"returned value nests deeper than {MAX_DEPTH} levels")
        if id(value) in active:
            raise InstructionFailure("serialization", "cannot return a value that contains itself")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                if not all(isinstance(k, str) for k in value):
                    raise InstructionFailure("serialization", "cannot return a dict with non-string keys")
                return {
                    "type": "object",
                    "value": {k: _encode(v, budget, export_tensor, active, depth + 1) for k, v in value.items()},
                }
            return {"type": "array", "value": [_encode(v, budget, export_tensor, active, depth + 1) for v in value]}
        finally:
            active.discard(id(value))
    exported = export_tensor(value)
    if exported is not None:
        dtype, shape, data = exported
        return {"type": "tensor", "dtype": dtype, "shape": list(shape), "part": budget.add(data)}
    raise InstructionFailure("serialization", f"cannot return value of type {type(value).__name__}")
