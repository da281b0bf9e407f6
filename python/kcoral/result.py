"""Strict decoding of ``/execute`` outcomes (protocol §4) into :class:`ProgramResult`."""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from .artifacts import ReturnedFile, ReturnedFolder, validate_manifest
from .errors import EXECUTION_ERROR_KINDS, ProtocolError
from .program import DTYPE_ITEM_SIZES

__all__ = [
    "ProgramResult",
    "decode_program_result",
    "decode_response",
    "parse_cache_miss",
    "parse_content_type",
    "parse_multipart",
    "strict_json_loads",
]

_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_PART_RE = re.compile(r"return:(0|[1-9][0-9]*)")
_INSTRUCTION_OPS = frozenset({"upload", "get_function", "run", "return"})
_ERROR_KEYS = frozenset({"kind", "message", "instruction_index", "instruction_op", "instruction_id", "traceback"})
_GPU_ACCESS_KEYS = _ERROR_KEYS | {"cuda_call", "location", "interfered_request_id"}
_MAX_GPU_IDS = 8


@dataclass
class ProgramResult:
    """Outcome of one executed program (COMPLETED or FAILED)."""

    status: str
    request_id: str
    queue_ms: float
    elapsed_ms: float
    lease_wait_ms: float
    lease_held_ms: float
    results: dict[str, Any]
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    error: dict[str, Any] | None = None
    gpu_ids: tuple[int, ...] = field(default=())
    # Its benchmarks' timing spans on a KCoral GPU server (docs/gpu-scheduling.md):
    # {count, held_ms, waited_ms, housekeeping_beside, foreign_processes: [{pid, name}]};
    # None when nothing was timed.
    timing_spans: dict[str, Any] | None = None

    @property
    def completed(self) -> bool:
        return self.status == "COMPLETED"

    def __getitem__(self, key: str) -> Any:
        return self.results[key]


# --------------------------------------------------------------------- JSON
def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number literal {name}")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def strict_json_loads(data: bytes | str, what: str = "response body") -> Any:
    """Parse JSON strictly: UTF-8 only, no duplicate keys, no NaN/Infinity."""
    try:
        text = data.decode("utf-8") if isinstance(data, (bytes, bytearray)) else data
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_reject_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ProtocolError(f"invalid JSON in {what}: {exc}") from None


# ---------------------------------------------------------------- framing
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def _parse_header_params(value: str) -> tuple[str, list[tuple[str, str]]]:
    """Split ``type; a=b; c="d"`` into the lowercased type and its parameters
    (names lowercased, quoted values unescaped)."""
    pos = 0
    n = len(value)

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and value[pos] in " \t":
            pos += 1

    end = value.find(";")
    head = (value if end < 0 else value[:end]).strip().lower()
    params: list[tuple[str, str]] = []
    if end < 0:
        return head, params
    pos = end
    while pos < n:
        if value[pos] != ";":
            raise ValueError(f"malformed header parameters in {value!r}")
        pos += 1
        skip_ws()
        match = _TOKEN_RE.match(value, pos)
        if not match:
            raise ValueError(f"malformed parameter name in {value!r}")
        name = match.group(0).lower()
        pos = match.end()
        skip_ws()
        if pos >= n or value[pos] != "=":
            raise ValueError(f"parameter {name!r} has no value in {value!r}")
        pos += 1
        skip_ws()
        if pos < n and value[pos] == '"':
            pos += 1
            chars = []
            while True:
                if pos >= n:
                    raise ValueError(f"unterminated quoted string in {value!r}")
                ch = value[pos]
                if ch == "\\":
                    if pos + 1 >= n:
                        raise ValueError(f"bad escape in {value!r}")
                    chars.append(value[pos + 1])
                    pos += 2
                elif ch == '"':
                    pos += 1
                    break
                else:
                    chars.append(ch)
                    pos += 1
            param_value = "".join(chars)
        else:
            match = _TOKEN_RE.match(value, pos)
            if not match:
                raise ValueError(f"malformed value of parameter {name!r} in {value!r}")
            param_value = match.group(0)
            pos = match.end()
        params.append((name, param_value))
        skip_ws()
    return head, params


def parse_content_type(value: str | None) -> tuple[str, dict[str, str]]:
    """Return the lowercased media type and parameters of a Content-Type value."""
    if not value:
        raise ProtocolError("response has no Content-Type")
    try:
        media_type, params = _parse_header_params(value)
    except ValueError as exc:
        raise ProtocolError(f"invalid Content-Type: {exc}") from None
    result: dict[str, str] = {}
    for name, param in params:
        if name in result:
            raise ProtocolError(f"duplicate Content-Type parameter {name!r}")
        result[name] = param
    return media_type, result


def _parse_part_headers(block: bytes) -> tuple[str, str]:
    disposition: str | None = None
    content_type: str | None = None
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        raise ProtocolError("non-ASCII multipart part header") from None
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise ProtocolError(f"malformed multipart part header {line!r}")
        lname = name.lower()
        value = value.strip(" \t")
        if lname == "content-disposition":
            if disposition is not None:
                raise ProtocolError("duplicate Content-Disposition in multipart part")
            disposition = value
        elif lname == "content-type":
            if content_type is not None:
                raise ProtocolError("duplicate Content-Type in multipart part")
            content_type = value
        else:
            raise ProtocolError(f"unexpected multipart part header {name!r}")
    if disposition is None or content_type is None:
        raise ProtocolError("multipart part needs exactly one Content-Disposition and one Content-Type")
    try:
        dtype, params = _parse_header_params(disposition)
    except ValueError as exc:
        raise ProtocolError(f"invalid Content-Disposition: {exc}") from None
    if dtype != "form-data":
        raise ProtocolError(f"multipart part disposition is {dtype!r}, expected form-data")
    names = [v for k, v in params if k == "name"]
    if len(names) != 1 or not names[0]:
        raise ProtocolError("multipart part needs exactly one non-empty name parameter")
    media_type, _ = parse_content_type(content_type)
    return names[0], media_type


def parse_multipart(body: bytes, boundary: str) -> list[tuple[str, str, bytes]]:
    """Parse a multipart/form-data body (CRLF framing, no preamble, nothing but
    an optional CRLF after the close delimiter) into ``(name, media type,
    content)`` triples. Raises ProtocolError on any framing violation."""
    if not boundary or len(boundary) > 200:
        raise ProtocolError("invalid multipart boundary")
    try:
        delim = b"--" + boundary.encode("ascii")
    except UnicodeEncodeError:
        raise ProtocolError("non-ASCII multipart boundary") from None
    if not body.startswith(delim):
        raise ProtocolError("multipart body does not start with the boundary")
    parts: list[tuple[str, str, bytes]] = []
    pos = len(delim)
    inner = b"\r\n" + delim
    while True:
        if body.startswith(b"--", pos):
            if body[pos + 2 :] not in (b"", b"\r\n"):
                raise ProtocolError("unexpected data after the closing multipart boundary")
            break
        if not body.startswith(b"\r\n", pos):
            raise ProtocolError("malformed multipart boundary line")
        pos += 2
        header_end = body.find(b"\r\n\r\n", pos)
        if header_end < 0 or body.startswith(b"\r\n", pos):
            raise ProtocolError("multipart part without headers")
        name, media_type = _parse_part_headers(body[pos:header_end])
        pos = header_end + 4
        search = pos
        while True:
            nxt = body.find(inner, search)
            if nxt < 0:
                raise ProtocolError("multipart body is not terminated by a closing boundary")
            after = nxt + len(inner)
            # Bytes that merely start with the boundary marker are no delimiter.
            if body.startswith(b"--", after) or body.startswith(b"\r\n", after):
                break
            search = nxt + 1
        parts.append((name, media_type, body[pos:nxt]))
        pos = after
    if not parts:
        raise ProtocolError("multipart body has no parts")
    return parts


def decode_response(content_type: str | None, body: bytes) -> tuple[dict[str, Any], dict[str, bytes] | None]:
    """Split a 200 ``/execute`` body into its JSON object and binary parts.

    Returns ``(body, None)`` for ``application/json`` and ``(body, parts)``
    for ``multipart/form-data``, where ``parts`` maps ``return:N`` names to
    bytes in wire order (checked to be ``return:0``, ``return:1``, ...).
    """
    media_type, params = parse_content_type(content_type)
    parts: dict[str, bytes] | None
    if media_type == "application/json":
        obj = strict_json_loads(body)
        parts = None
    elif media_type == "multipart/form-data":
        boundary = params.get("boundary")
        if not boundary:
            raise ProtocolError("multipart response without a boundary")
        raw = parse_multipart(body, boundary)
        first_name, first_type, first_body = raw[0]
        if first_name != "result" or first_type != "application/json":
            raise ProtocolError("the first multipart part must be 'result' (application/json)")
        obj = strict_json_loads(first_body, "result part")
        parts = {}
        for index, (name, media, content) in enumerate(raw[1:]):
            if name == "result" or name in parts:
                raise ProtocolError(f"duplicate multipart part {name!r}")
            if name != f"return:{index}":
                raise ProtocolError(f"multipart part {index + 1} is {name!r}, expected 'return:{index}'")
            if media != "application/octet-stream":
                raise ProtocolError(f"part {name!r} has content type {media!r}, expected application/octet-stream")
            parts[name] = content
    else:
        raise ProtocolError(f"unexpected response content type {media_type!r}")
    if not isinstance(obj, dict):
        raise ProtocolError("response body is not a JSON object")
    return obj, parts


def parse_cache_miss(obj: dict[str, Any]) -> list[str]:
    """Validate a CACHE_MISS body and return its ``missing_blobs``."""
    missing = obj.get("missing_blobs")
    if not isinstance(missing, list) or not missing:
        raise ProtocolError("CACHE_MISS needs a non-empty missing_blobs list")
    seen: set[str] = set()
    for digest in missing:
        if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
            raise ProtocolError(f"CACHE_MISS lists an invalid blob hash {digest!r}")
        if digest in seen:
            raise ProtocolError(f"CACHE_MISS lists blob {digest} twice")
        seen.add(digest)
    return list(missing)


# ------------------------------------------------------------------ values
_numpy_dtypes: dict[str, Any] = {}


def _numpy_dtype(name: str) -> Any:
    dtype = _numpy_dtypes.get(name)
    if dtype is not None:
        return dtype
    import numpy as np

    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            import ml_dtypes
        except ImportError:
            raise ProtocolError(f"decoding a {name} tensor needs the ml_dtypes package") from None
        dtype = np.dtype(getattr(ml_dtypes, name))
    elif name == "bool":
        dtype = np.dtype(np.bool_)
    else:
        dtype = np.dtype(name).newbyteorder("<")
    _numpy_dtypes[name] = dtype
    return dtype


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Decoder:
    def __init__(self, parts: dict[str, bytes] | None) -> None:
        self.parts = parts or {}
        self.next_part = 0

    @staticmethod
    def _keys(node: dict[str, Any], expected: frozenset[str] | set[str], type_name: str) -> None:
        if node.keys() != expected:
            extra = sorted(node.keys() - expected)
            missing = sorted(expected - node.keys())
            raise ProtocolError(f"{type_name} value node has extra keys {extra} / missing keys {missing}")

    def _binary(self, node: dict[str, Any]) -> bytes:
        part = node["part"]
        digest = node["sha256"]
        if not isinstance(part, str) or not _PART_RE.fullmatch(part):
            raise ProtocolError(f"invalid part name {part!r}")
        expected = f"return:{self.next_part}"
        if part != expected:
            raise ProtocolError(f"binary node refers to {part!r}, expected {expected!r}")
        self.next_part += 1
        if not isinstance(digest, str) or not _SHA256_RE.fullmatch(digest):
            raise ProtocolError(f"invalid sha256 {digest!r} for {part}")
        data = self.parts.get(part)
        if data is None:
            raise ProtocolError(f"binary part {part!r} is missing from the response")
        if hashlib.sha256(data).hexdigest() != digest:
            raise ProtocolError(f"sha256 mismatch for {part}")
        return data

    def _file(self, node: Any) -> ReturnedFile:
        if not isinstance(node, dict) or node.get("type") != "file":
            raise ProtocolError("folder entries must be file nodes")
        self._keys(node, frozenset({"type", "size", "part", "sha256"}), "file")
        size = node["size"]
        if not _is_int(size) or size < 0:
            raise ProtocolError(f"invalid file size {size!r}")
        data = self._binary(node)
        if len(data) != size:
            raise ProtocolError(f"file part has {len(data)} bytes, node says {size}")
        return ReturnedFile(data)

    def decode(self, node: Any) -> Any:
        if not isinstance(node, dict):
            raise ProtocolError(f"value node is not an object: {node!r}")
        kind = node.get("type")
        if kind == "null":
            self._keys(node, {"type"}, kind)
            return None
        if kind == "boolean":
            self._keys(node, {"type", "value"}, kind)
            if not isinstance(node["value"], bool):
                raise ProtocolError("boolean node value is not a bool")
            return node["value"]
        if kind == "integer":
            self._keys(node, {"type", "value"}, kind)
            if not _is_int(node["value"]):
                raise ProtocolError("integer node value is not an int")
            return node["value"]
        if kind == "number":
            self._keys(node, {"type", "value"}, kind)
            value = node["value"]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProtocolError("number node value is not a number")
            try:
                value = float(value)
            except OverflowError:
                raise ProtocolError("number node value is out of range") from None
            if not math.isfinite(value):
                raise ProtocolError("number node value is not finite")
            return value
        if kind == "string":
            self._keys(node, {"type", "value"}, kind)
            if not isinstance(node["value"], str):
                raise ProtocolError("string node value is not a string")
            return node["value"]
        if kind == "array":
            self._keys(node, {"type", "value"}, kind)
            if not isinstance(node["value"], list):
                raise ProtocolError("array node value is not a list")
            return [self.decode(item) for item in node["value"]]
        if kind == "object":
            self._keys(node, {"type", "value"}, kind)
            if not isinstance(node["value"], dict):
                raise ProtocolError("object node value is not an object")
            return {key: self.decode(item) for key, item in node["value"].items()}
        if kind == "bytes":
            self._keys(node, {"type", "part", "sha256"}, kind)
            return self._binary(node)
        if kind == "tensor":
            return self._tensor(node)
        if kind == "file":
            return self._file(node)
        if kind == "folder":
            self._keys(node, {"type", "files", "directories"}, kind)
            files, directories = node["files"], node["directories"]
            if not isinstance(files, dict) or not isinstance(directories, list):
                raise ProtocolError("folder node needs a files object and a directories list")
            try:
                validate_manifest(files.keys(), directories)
            except ValueError as exc:
                raise ProtocolError(f"invalid folder manifest: {exc}") from None
            decoded = {path: self._file(item) for path, item in files.items()}
            return ReturnedFolder(decoded, directories)
        raise ProtocolError(f"unknown value node type {kind!r}")

    def _tensor(self, node: dict[str, Any]) -> Any:
        self._keys(node, {"type", "dtype", "shape", "part", "sha256"}, "tensor")
        dtype, shape = node["dtype"], node["shape"]
        if not isinstance(dtype, str) or dtype not in DTYPE_ITEM_SIZES:
            raise ProtocolError(f"unsupported tensor dtype {dtype!r}")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise ProtocolError(f"invalid tensor shape {shape!r}")
        data = self._binary(node)
        expected = math.prod(shape) * DTYPE_ITEM_SIZES[dtype]
        if len(data) != expected:
            raise ProtocolError(f"tensor part has {len(data)} bytes, expected {expected}")
        import numpy as np

        np_dtype = _numpy_dtype(dtype)
        array = np.frombuffer(bytearray(data), dtype=np_dtype).reshape(shape)
        if sys.byteorder == "big" and np_dtype.itemsize > 1 and np_dtype.byteorder == "=":
            array = array.byteswap()  # ml_dtypes types are native-endian
        return array


def _finite_number(obj: dict[str, Any], key: str) -> float:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ProtocolError(f"outcome field {key!r} must be a number")
    try:
        result = float(value)
    except OverflowError:
        raise ProtocolError(f"outcome field {key!r} is out of range") from None
    if not math.isfinite(result):
        raise ProtocolError(f"outcome field {key!r} must be finite")
    return result


def _parse_error(error: Any) -> dict[str, Any]:
    if not isinstance(error, dict):
        raise ProtocolError("FAILED outcome needs an error object")
    expected = _GPU_ACCESS_KEYS if error.get("kind") == "gpu_access" else _ERROR_KEYS
    if error.keys() != expected:
        extra = sorted(error.keys() - expected)
        missing = sorted(expected - error.keys())
        raise ProtocolError(f"error object has extra keys {extra} / missing keys {missing}")
    if error["kind"] not in EXECUTION_ERROR_KINDS:
        raise ProtocolError(f"unknown error kind {error['kind']!r}")
    if not isinstance(error["message"], str):
        raise ProtocolError("error message must be a string")
    index = error["instruction_index"]
    if not _is_int(index) or index < 0:
        raise ProtocolError(f"invalid instruction_index {index!r}")
    if error["instruction_op"] not in _INSTRUCTION_OPS:
        raise ProtocolError(f"invalid instruction_op {error['instruction_op']!r}")
    if error["instruction_id"] is not None and not isinstance(error["instruction_id"], str):
        raise ProtocolError("instruction_id must be a string or null")
    if not isinstance(error["traceback"], str):
        raise ProtocolError("traceback must be a string")
    if error["kind"] == "gpu_access":
        if not isinstance(error["cuda_call"], str) or not isinstance(error["location"], str):
            raise ProtocolError("gpu_access error needs string cuda_call and location")
        interfered = error["interfered_request_id"]
        if interfered is not None and not isinstance(interfered, str):
            raise ProtocolError("interfered_request_id must be a string or null")
    return dict(error)


def _parse_timing_spans(spans: Any) -> dict[str, Any] | None:
    if spans is None:
        return None
    keys = {"count", "held_ms", "waited_ms", "housekeeping_beside", "foreign_processes"}
    if not isinstance(spans, dict) or set(spans) != keys:
        raise ProtocolError("timing_spans must be an object of " + ", ".join(sorted(keys)))
    for key in ("count", "housekeeping_beside"):
        if not _is_int(spans[key]) or spans[key] < 0:
            raise ProtocolError(f"timing_spans.{key} must be a non-negative int")
    for key in ("held_ms", "waited_ms"):
        if _finite_number(spans, key) < 0:
            raise ProtocolError(f"timing_spans.{key} must not be negative")
    foreign = spans["foreign_processes"]
    if not isinstance(foreign, list) or not all(
        isinstance(p, dict) and set(p) == {"pid", "name"} and _is_int(p["pid"]) and isinstance(p["name"], str)
        for p in foreign
    ):
        raise ProtocolError("timing_spans.foreign_processes must be a list of {pid: int, name: str}")
    return dict(spans)


def decode_program_result(obj: dict[str, Any], parts: dict[str, bytes] | None) -> ProgramResult:
    """Validate a COMPLETED/FAILED outcome body and decode its values."""
    if not isinstance(obj, dict):
        raise ProtocolError("outcome body is not a JSON object")
    status = obj.get("status")
    if status not in ("COMPLETED", "FAILED"):
        raise ProtocolError(f"unexpected outcome status {status!r}")
    request_id = obj.get("request_id")
    if not isinstance(request_id, str) or not request_id:
        raise ProtocolError("outcome needs a non-empty request_id")
    timings = {key: _finite_number(obj, key) for key in ("queue_ms", "elapsed_ms", "lease_wait_ms", "lease_held_ms")}
    for key in ("stdout", "stderr"):
        if not isinstance(obj.get(key), str):
            raise ProtocolError(f"outcome field {key!r} must be a string")
    flags = {}
    for key in ("stdout_truncated", "stderr_truncated"):
        value = obj.get(key, False)
        if not isinstance(value, bool):
            raise ProtocolError(f"outcome field {key!r} must be a bool")
        flags[key] = value

    has_ids, has_count = "gpu_ids" in obj, "gpu_count" in obj
    if has_ids != has_count:
        raise ProtocolError("gpu_ids and gpu_count must be present together")
    gpu_ids: tuple[int, ...] = ()
    if has_ids:
        ids, count = obj["gpu_ids"], obj["gpu_count"]
        if not isinstance(ids, list) or not all(_is_int(i) and i >= 0 for i in ids):
            raise ProtocolError("gpu_ids must be a list of non-negative ints")
        if len(set(ids)) != len(ids) or len(ids) > _MAX_GPU_IDS:
            raise ProtocolError("gpu_ids must be distinct and at most 8")
        if not _is_int(count) or count < 1 or count != len(ids):
            raise ProtocolError("gpu_count must equal len(gpu_ids) and be at least 1")
        gpu_ids = tuple(ids)

    timing_spans = _parse_timing_spans(obj.get("timing_spans"))

    if status == "COMPLETED":
        if "error" in obj:
            raise ProtocolError("a COMPLETED outcome must not carry an error")
        error = None
    else:
        error = _parse_error(obj.get("error"))

    results = obj.get("results")
    if not isinstance(results, dict):
        raise ProtocolError("outcome field 'results' must be an object")
    decoder = _Decoder(parts)
    decoded = {key: decoder.decode(node) for key, node in results.items()}
    if decoder.next_part != len(parts or ()):
        raise ProtocolError(f"response carries {len(parts or ())} binary parts but {decoder.next_part} are referenced")
    return ProgramResult(
        status=status,
        request_id=request_id,
        results=decoded,
        stdout=obj["stdout"],
        stderr=obj["stderr"],
        error=error,
        gpu_ids=gpu_ids,
        timing_spans=timing_spans,
        **timings,
        **flags,
    )
