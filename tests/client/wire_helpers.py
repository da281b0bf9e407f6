"""Helpers for crafting KCoral wire bodies in client tests."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def outcome(status: str = "COMPLETED", results: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "status": status,
        "request_id": "7f61b94e-034a-4e80-b67d-eca52bb952cc",
        "queue_ms": 0.4,
        "elapsed_ms": 812.6,
        "lease_wait_ms": 0.0,
        "lease_held_ms": 1,
        "stdout": "hello\n",
        "stderr": "",
        "stdout_truncated": False,
        "stderr_truncated": False,
        "results": results if results is not None else {},
    }
    body.update(extra)
    return body


def multipart(result: dict[str, Any] | bytes, parts: list[tuple[str, bytes]], boundary: str = "kcoral-0123456789abcdef0123456789abcdef",
              result_type: str = "application/json", part_type: str = "application/octet-stream") -> tuple[str, bytes]:
    """Return (content type, body) of a multipart response."""
    raw = result if isinstance(result, bytes) else json.dumps(result).encode()
    out = [f"--{boundary}\r\n".encode(),
           f'Content-Disposition: form-data; name="result"\r\nContent-Type: {result_type}\r\n\r\n'.encode(),
           raw]
    for name, data in parts:
        out.append(f"\r\n--{boundary}\r\n".encode())
        out.append(f'Content-Disposition: form-data; name="{name}"\r\nContent-Type: {part_type}\r\n\r\n'.encode())
        out.append(data)
    out.append(f"\r\n--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(out)


def bytes_node(data: bytes, index: int) -> dict[str, Any]:
    return {"type": "bytes", "part": f"return:{index}", "sha256": sha(data)}


def file_node(data: bytes, index: int) -> dict[str, Any]:
    return {"type": "file", "size": len(data), "part": f"return:{index}", "sha256": sha(data)}


def tensor_node(dtype: str, shape: list[int], data: bytes, index: int) -> dict[str, Any]:
    return {"type": "tensor", "dtype": dtype, "shape": shape, "part": f"return:{index}", "sha256": sha(data)}
