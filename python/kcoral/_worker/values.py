"""Encodes Python values into raw value nodes (spec/protocol.md §4.2).

Binary data (bytes, tensors, files) becomes a segment; its node carries the
segment's index as "part". The server checks every node, numbers the parts
"return:<k>" and computes the sha256 (src/protocol/value_codec.h), so nothing
here is trusted by the server.
"""

import math

from kcoral._worker.errors import InstructionFailure

# What the server's JSON reader holds exactly: int64 and uint64.
INTEGER_LOW, INTEGER_HIGH = -(2**63), 2**64 - 1


class SegmentBudget:
    """Binary segments of one response and the bytes still allowed."""

    def __init__(self, max_bytes: int):
        self.segments: list = []
        self.max_bytes = max_bytes
        self.used = 0

    def checkpoint(self) -> tuple[int, int]:
        return len(self.segments), self.used

    def rollback(self, mark: tuple[int, int]) -> None:
        del self.segments[mark[0]:]
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
        return _encode(value, budget, export_tensor, set())
    except RecursionError:
        raise InstructionFailure("serialization", "returned value nests too deeply") from None


def _encode(value, budget, export_tensor, active: set) -> dict:
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean", "value": value}
    if isinstance(value, int):
        if not INTEGER_LOW <= value <= INTEGER_HIGH:
            raise InstructionFailure("serialization", "integer outside the 64-bit range")
        return {"type": "integer", "value": int(value)}
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InstructionFailure("serialization", f"cannot return non-finite number {value!r}")
        return {"type": "number", "value": float(value)}
    if isinstance(value, str):
        return {"type": "string", "value": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"type": "bytes", "part": budget.add(bytes(value))}
    if isinstance(value, (list, tuple, dict)):
        if id(value) in active:
            raise InstructionFailure("serialization", "cannot return a value that contains itself")
        active.add(id(value))
        try:
            if isinstance(value, dict):
                if not all(isinstance(k, str) for k in value):
                    raise InstructionFailure("serialization", "cannot return a dict with non-string keys")
                return {
                    "type": "object",
                    "value": {k: _encode(v, budget, export_tensor, active) for k, v in value.items()},
                }
            return {"type": "array", "value": [_encode(v, budget, export_tensor, active) for v in value]}
        finally:
            active.discard(id(value))
    exported = export_tensor(value)
    if exported is not None:
        dtype, shape, data = exported
        return {"type": "tensor", "dtype": dtype, "shape": list(shape), "part": budget.add(data)}
    raise InstructionFailure("serialization", f"cannot return value of type {type(value).__name__}")
