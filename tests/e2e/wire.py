"""Raw wire helpers for end-to-end tests: hand-built multipart bodies and
programs, posted with httpx so nothing in the client can hide server behaviour."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from typing import Any

import httpx

UUID_RE = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
BOUNDARY = "e2e-boundary-3f9a1c"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def part(name: str, content_type: str | None, data: bytes) -> bytes:
    headers = f'Content-Disposition: form-data; name="{name}"\r\n'
    if content_type is not None:
        headers += f"Content-Type: {content_type}\r\n"
    return headers.encode() + b"\r\n" + data


def body_of(parts: list[bytes], boundary: str = BOUNDARY) -> bytes:
    delim = b"--" + boundary.encode()
    out = b""
    for p in parts:
        out += delim + b"\r\n" + p + b"\r\n"
    return out + delim + b"--\r\n"


def program_part(program: Any) -> bytes:
    data = program if isinstance(program, bytes) else json.dumps(program).encode()
    return part("program", "application/json", data)


def blob_part(data: bytes, name: str | None = None) -> bytes:
    return part("blob:" + (name or sha(data)), "application/octet-stream", data)


def post(
    url: str,
    parts: list[bytes],
    *,
    headers: dict | None = None,
    timeout: float = 30,
    boundary: str = BOUNDARY,
    verify: Any = True,
) -> httpx.Response:
    """`verify`: httpx's, an ssl.SSLContext for an https server."""
    all_headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", **(headers or {})}
    return httpx.post(
        url + "/execute", content=body_of(parts, boundary), headers=all_headers, timeout=timeout, verify=verify
    )


def execute(url: str, program: Any, blobs: list[bytes] = (), **kwargs) -> httpx.Response:
    return post(url, [program_part(program), *(blob_part(b) for b in blobs)], **kwargs)


def ref(name: str) -> dict:
    return {"$ref": name}


def module_program(source: str, name: str = "main", args: list | None = None, extra: list | None = None) -> dict:
    """upload module `m`, get_function `f` = name, run `r` with args, return it as `out`."""
    return {
        "instructions": [
            {"op": "upload", "id": "m", "kind": "module", "source": source},
            {"op": "get_function", "id": "f", "module": ref("m"), "name": name},
            {"op": "run", "id": "r", "fn": ref("f"), "args": args or []},
            {"op": "return", "key": "out", "value": ref("r")},
            *(extra or []),
        ]
    }


TRIVIAL = module_program("def main():\n    return 7\n")


def assert_error(response: httpx.Response, status: int, kind: str) -> str:
    """The exact ERROR body shape; returns the message."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"status", "request_id", "error"}, body
    assert body["status"] == "ERROR"
    assert set(body["error"]) == {"kind", "message"}, body
    assert body["error"]["kind"] == kind, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    assert UUID_RE.match(body["request_id"]), body
    assert response.headers.get_list("x-request-id") == [body["request_id"]]
    return body["error"]["message"]


def fresh_uuid() -> str:
    return str(uuid.uuid4())
