"""Client-side program builder (protocol §2, §5.2, §5.3)."""

from __future__ import annotations

import errno
import math
import operator
import os
import re
import stat
import sys
from collections.abc import Callable, Container, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import blob_names
from .artifacts import normalize_remote_path

__all__ = ["Program", "Register", "DTYPE_ITEM_SIZES"]

#: The twelve tensor dtypes of the wire protocol and their item sizes.
DTYPE_ITEM_SIZES: dict[str, int] = {
    "bool": 1,
    "uint8": 1,
    "int8": 1,
    "int16": 2,
    "int32": 4,
    "int64": 8,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

_UPLOAD_KINDS = ("module", "tensor", "bytes", "library")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_MODULE_LANGUAGES = ("python", "cuda")

#: upload_folder's errors for walk_regular_files, formatted with the local path.
_UPLOAD_FOLDER_REFUSALS = {
    "repeated": "directory {!r} is visited more than once",
    "symlink": "symlink in folder upload: {!r}",
    "special": "special file in folder upload: {!r}",
}


@dataclass(frozen=True)
class Register:
    """Local name for a request-scoped server value (the id of an instruction)."""

    id: str


def _is_bytes_like(value: object) -> bool:
    return isinstance(value, (bytes, bytearray, memoryview))


def _copy_bytes(value: bytes | bytearray | memoryview) -> bytes:
    if isinstance(value, bytes):
        return value
    return memoryview(value).tobytes()


def _check_sha256(sha256: object) -> None:
    if sha256 is not None and (not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256)):
        raise ValueError(f"sha256 must be 64 lowercase hex characters, got {sha256!r}")


def _ref_id(value: object, what: str) -> str:
    """Return the id named by a Register or an exact ``{"$ref": id}`` dict."""
    if isinstance(value, Register):
        return value.id
    if isinstance(value, dict):
        if len(value) == 1 and isinstance(value.get("$ref"), str) and value["$ref"]:
            return value["$ref"]
        raise ValueError(f"{what} must be a Register or a {{'$ref': id}} reference, got {value!r}")
    raise TypeError(f"{what} must be a Register or a {{'$ref': id}} reference, not {type(value).__name__}")


def _normalize_dtype(dtype: object) -> str:
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type) and "numpy" in sys.modules:
        # numpy scalar types such as np.float16 (or ml_dtypes.bfloat16)
        import numpy as np

        try:
            name = np.dtype(dtype).name
        except TypeError:
            name = getattr(dtype, "__name__", str(dtype))
    else:
        name = getattr(dtype, "name", None)
        if not isinstance(name, str):
            name = str(dtype)
    name = name.removeprefix("torch.")
    if name not in DTYPE_ITEM_SIZES:
        raise ValueError(f"unsupported tensor dtype {dtype!r}; expected one of " + ", ".join(DTYPE_ITEM_SIZES))
    return name


def _normalize_shape(shape: object) -> list[int]:
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise ValueError(f"shape must be a sequence of non-negative ints, got {shape!r}")
    result = []
    for dim in shape:  # type: ignore[union-attr]
        if isinstance(dim, bool):
            raise ValueError(f"shape entries must be ints, got {dim!r}")
        try:
            value = operator.index(dim)
        except TypeError:
            raise ValueError(f"shape entries must be ints, got {dim!r}") from None
        if value < 0:
            raise ValueError(f"shape entries must be non-negative, got {value}")
        result.append(value)
    return result


def _torch_fields(value: Any) -> tuple[str, list[int], bytes]:
    import torch

    tensor = value.detach().cpu().contiguous()
    dtype = str(tensor.dtype).removeprefix("torch.")
    if dtype not in DTYPE_ITEM_SIZES:
        raise ValueError(f"unsupported tensor dtype {dtype!r}")
    shape = [int(d) for d in tensor.shape]
    flat = tensor.reshape(-1)
    if flat.numel() == 0:
        data = b""
    else:
        data = flat.view(torch.uint8).numpy().tobytes()
        if sys.byteorder != "little" and DTYPE_ITEM_SIZES[dtype] > 1:
            import numpy as np

            data = np.frombuffer(data, dtype=np.uint8).reshape(-1, DTYPE_ITEM_SIZES[dtype])[:, ::-1].tobytes()
    return dtype, shape, data


def _numpy_fields(array: Any) -> tuple[str, list[int], bytes]:
    import numpy as np

    array = np.asarray(array)
    if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn 0-d into 1-d)
        array = array.copy(order="C")
    dtype = array.dtype
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and sys.byteorder == "big"):
        if dtype.itemsize > 1:
            array = array.byteswap()
    name = _normalize_dtype(dtype.name)
    return name, [int(d) for d in array.shape], array.tobytes()


def _tensor_fields(value: object, dtype: object, shape: object) -> tuple[str, list[int], bytes]:
    """Convert a tensor-like value to (dtype name, shape, little-endian bytes)."""
    declared_dtype = None if dtype is None else _normalize_dtype(dtype)
    declared_shape = None if shape is None else _normalize_shape(shape)

    if _is_bytes_like(value):
        if declared_dtype is None or declared_shape is None:
            raise ValueError("raw bytes tensor uploads need both dtype and shape")
        data = _copy_bytes(value)  # type: ignore[arg-type]
        name, dims = declared_dtype, declared_shape
    else:
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(value, torch.Tensor):
            name, dims, data = _torch_fields(value)
        else:
            np = None
            try:
                import numpy as np  # noqa: F811
            except ImportError:  # pragma: no cover - numpy is a dependency
                pass
            if np is not None and isinstance(value, np.ndarray):
                name, dims, data = _numpy_fields(value)
            elif np is not None and hasattr(value, "__dlpack__"):
                name, dims, data = _numpy_fields(np.from_dlpack(value))
            elif all(hasattr(value, attr) for attr in ("dtype", "shape", "tobytes")):
                name = _normalize_dtype(value.dtype)  # type: ignore[attr-defined]
                dims = _normalize_shape(value.shape)  # type: ignore[attr-defined]
                data = _copy_bytes(value.tobytes())  # type: ignore[attr-defined]
            else:
                raise TypeError(
                    f"cannot upload {type(value).__name__} as a tensor; pass a numpy array, "
                    "a torch tensor, a DLPack object, or bytes with dtype and shape"
                )
        if declared_dtype is not None and declared_dtype != name:
            raise ValueError(f"declared dtype {declared_dtype!r} does not match the value's dtype {name!r}")
        if declared_shape is not None and declared_shape != dims:
            raise ValueError(f"declared shape {declared_shape} does not match the value's shape {dims}")
    expected = math.prod(dims) * DTYPE_ITEM_SIZES[name]
    if len(data) != expected:
        raise ValueError(f"tensor of dtype {name} and shape {dims} needs {expected} bytes, got {len(data)}")
    return name, dims, data


class Program:
    """Builder for one KCoral program: an ordered list of wire instructions plus
    the blob bytes they reference (keyed by SHA-256, each stored once).

    Builder methods validate everything before changing the program, so a
    method that raises leaves the program unchanged. Byte values are captured
    when the method is called (snapshot semantics).
    """

    def __init__(self) -> None:
        self._instructions: list[dict[str, Any]] = []
        self._ids: set[str] = set()
        self._next_id = 0
        self._return_keys: set[str] = set()
        self._file_paths: set[str] = set()
        self._file_dirs: set[str] = set()
        self._blobs: dict[str, bytes] = {}
        # Large blobs not named yet (blob_names.py): [bytes, instructions that use them].
        self._unnamed: list[tuple[bytes, list[dict[str, Any]]]] = []

    # ------------------------------------------------------------------ ids
    def _check_explicit_id(self, id: object) -> str:
        if not isinstance(id, str) or not id:
            raise ValueError(f"id must be a non-empty string, got {id!r}")
        if id in self._ids:
            raise ValueError(f"duplicate id {id!r}")
        return id

    def _generate_id(self, op: str) -> tuple[str, int]:
        n = self._next_id
        while f"{op}_{n}" in self._ids:
            n += 1
        return f"{op}_{n}", n + 1

    def _commit(self, instruction: dict[str, Any], id: str | None, op: str) -> str:
        """Assign the id (explicit or generated) and append the instruction."""
        if id is None:
            new_id, self._next_id = self._generate_id(op)
        else:
            new_id = id
        self._ids.add(new_id)
        instruction["id"] = new_id
        self._instructions.append(instruction)
        return new_id

    def _known(self, value: object, what: str) -> str:
        ref = _ref_id(value, what)
        if ref not in self._ids:
            raise ValueError(f"{what} references unknown id {ref!r}")
        return ref

    def _add_blob(self, data: bytes, instruction: dict[str, Any], sha256: str | None = None) -> None:
        """Sets ``instruction["blob"]`` now, or when the blob is named."""
        if sha256 is not None:
            instruction["blob"] = sha256
            self._blobs.setdefault(sha256, data)
            return
        digest = blob_names.known_name(data)
        if digest is None and len(data) >= blob_names.LARGE_BLOB_BYTES:
            for unnamed, users in self._unnamed:
                if unnamed is data:
                    users.append(instruction)
                    return
            self._unnamed.append((data, [instruction]))
            return
        if digest is None:
            digest = blob_names.sha256_of(data)
        instruction["blob"] = digest
        self._blobs.setdefault(digest, data)

    def _name_blobs(self, name) -> None:
        """Names the unnamed large blobs with ``name(bytes) -> digest``."""
        while self._unnamed:
            data, users = self._unnamed[0]
            digest = name(data)
            for instruction in users:
                instruction["blob"] = digest
            self._blobs.setdefault(digest, data)
            del self._unnamed[0]

    # ------------------------------------------------------------- builders
    def upload(
        self,
        *,
        id: str | None = None,
        kind: str,
        source: str | None = None,
        value: object = None,
        dtype: object = None,
        shape: object = None,
        language: str | None = None,
        sha256: str | None = None,
    ) -> Register:
        """Upload a ``module`` (Python source, or CUDA source with
        ``language="cuda"``), a ``tensor``, ``bytes`` or a ``library``.

        ``sha256``: the blob's digest, if the caller knows it, so that it is
        not hashed here (a server checks it when the bytes reach it; one that
        already has blobs of that digest uses those)."""
        if kind not in _UPLOAD_KINDS:
            raise ValueError(
                f"unsupported upload kind {kind!r}; expected one of {', '.join(_UPLOAD_KINDS)}"
                + (" (use upload_file for files)" if kind == "file" else "")
            )
        if id is not None:
            self._check_explicit_id(id)
        _check_sha256(sha256)

        def reject(**fields: object) -> None:
            for field, field_value in fields.items():
                if field_value is not None:
                    raise TypeError(f"{field!r} is not valid for a {kind} upload")

        blob: bytes | None = None
        instruction: dict[str, Any]
        if kind == "module":
            reject(value=value, dtype=dtype, shape=shape, sha256=sha256)
            if not isinstance(source, str):
                raise TypeError("a module upload needs source as a str")
            if language is not None and language not in _MODULE_LANGUAGES:
                raise ValueError(f"language must be one of {_MODULE_LANGUAGES}, got {language!r}")
            instruction = {"op": "upload", "id": None, "kind": "module", "source": source}
            if language is not None:
                instruction["language"] = language
        elif kind == "tensor":
            reject(source=source, language=language)
            if value is None:
                raise TypeError("a tensor upload needs a value")
            name, dims, blob = _tensor_fields(value, dtype, shape)
            instruction = {
                "op": "upload",
                "id": None,
                "kind": "tensor",
                "blob": None,  # set by _add_blob
                "dtype": name,
                "shape": dims,
            }
        else:  # bytes, library
            reject(source=source, dtype=dtype, shape=shape, language=language)
            if not _is_bytes_like(value):
                raise TypeError(f"a {kind} upload needs bytes, bytearray or memoryview, not {type(value).__name__}")
            blob = _copy_bytes(value)  # type: ignore[arg-type]
            instruction = {"op": "upload", "id": None, "kind": kind, "blob": None}
        if blob is not None:
            self._add_blob(blob, instruction, sha256)
        return Register(self._commit(instruction, id, "upload"))

    def _check_file_path(self, path: str, taken_files: set[str], taken_dirs: set[str]) -> None:
        if path in taken_files:
            raise ValueError(f"duplicate file upload path {path!r}")
        if path in taken_dirs:
            raise ValueError(f"file upload path {path!r} is a directory of another file upload")
        for i, ch in enumerate(path):
            if ch == "/" and path[:i] in taken_files:
                raise ValueError(f"file upload path {path!r} is below the uploaded file {path[:i]!r}")

    @staticmethod
    def _register_file_path(path: str, files: set[str], dirs: set[str]) -> None:
        files.add(path)
        for i, ch in enumerate(path):
            if ch == "/":
                dirs.add(path[:i])

    def upload_file(
        self, *, blob: bytes | bytearray | memoryview, path: str, id: str | None = None, sha256: str | None = None
    ) -> Register:
        """Write ``blob`` to ``path`` in the request workspace; the handle binds
        the normalized path string. ``sha256`` as for ``upload``."""
        if id is not None:
            self._check_explicit_id(id)
        _check_sha256(sha256)
        if not _is_bytes_like(blob):
            raise TypeError(f"blob must be bytes, bytearray or memoryview, not {type(blob).__name__}")
        normalized = normalize_remote_path(path)
        self._check_file_path(normalized, self._file_paths, self._file_dirs)
        data = _copy_bytes(blob)
        self._register_file_path(normalized, self._file_paths, self._file_dirs)
        instruction = {"op": "upload", "id": None, "kind": "file", "blob": None, "path": normalized}
        self._add_blob(data, instruction, sha256)
        return Register(self._commit(instruction, id, "upload"))

    def upload_folder(self, folder: str | os.PathLike[str], *, path: str) -> None:
        """Upload every regular file under ``folder`` (hidden files included) as
        ``file`` uploads below remote directory ``path``, sorted by remote path.

        Symlinks (the root included), special files, repeated directories and
        files that change while being read are rejected. Empty directories are
        dropped. All-or-nothing: on failure the program is unchanged.
        """
        if not isinstance(path, str):
            raise TypeError(f"path must be a str, not {type(path).__name__}")
        if not path:
            raise ValueError("path must be a non-empty string")
        # Validate the prefix on its own; "." means the workspace root.
        if path.startswith("/"):
            raise ValueError(f"path {path!r} must be relative")
        if all(part in ("", ".") for part in path.split("/")):
            prefix = ""
        else:
            prefix = normalize_remote_path(path)
        root = os.fspath(folder)
        if isinstance(root, bytes):
            raise TypeError("folder must be a text path")
        root_st = os.lstat(root)
        if stat.S_ISLNK(root_st.st_mode):
            raise ValueError(f"folder {root!r} is a symlink")
        if not stat.S_ISDIR(root_st.st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", root)

        collected: list[tuple[str, bytes]] = []
        for child_rel, local, st in walk_regular_files(
            root, root_st, seen=set(), refusals=_UPLOAD_FOLDER_REFUSALS, error=ValueError
        ):
            remote = normalize_remote_path(f"{prefix}/{child_rel}" if prefix else child_rel)
            collected.append((remote, _read_stable(local, st)))
        collected.sort(key=lambda item: item[0])

        files = set(self._file_paths)
        dirs = set(self._file_dirs)
        for remote, _ in collected:
            self._check_file_path(remote, files, dirs)
            self._register_file_path(remote, files, dirs)

        # Commit: nothing below can fail.
        for remote, data in collected:
            instruction = {"op": "upload", "id": None, "kind": "file", "blob": None, "path": remote}
            self._add_blob(data, instruction)
            self._commit(instruction, None, "upload")
        self._file_paths = files
        self._file_dirs = dirs

    def get_function(self, *, id: str | None = None, module: object, name: str, cpu_only: bool = False) -> Register:
        """Select ``name`` from an uploaded module or library."""
        if id is not None:
            self._check_explicit_id(id)
        module_id = self._known(module, "module")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if not isinstance(cpu_only, bool):
            raise TypeError(f"cpu_only must be a bool, not {type(cpu_only).__name__}")
        instruction: dict[str, Any] = {
            "op": "get_function",
            "id": None,
            "module": {"$ref": module_id},
            "name": name,
        }
        if cpu_only:
            instruction["cpu_only"] = True
        return Register(self._commit(instruction, id, "get_function"))

    def run(self, *, id: str | None = None, fn: Register, args: list[Any] | tuple[Any, ...] | None = None) -> Register:
        """Call ``fn`` with ``args``; top-level Registers become references."""
        if id is not None:
            self._check_explicit_id(id)
        if not isinstance(fn, Register):
            raise TypeError(f"fn must be a Register, not {type(fn).__name__}")
        fn_id = self._known(fn, "fn")
        if args is None:
            args = []
        if not isinstance(args, (list, tuple)):
            raise TypeError(f"args must be a list or tuple, not {type(args).__name__}")
        wire_args = []
        for arg in args:
            if isinstance(arg, Register):
                wire_args.append({"$ref": self._known(arg, "argument")})
            else:
                wire_args.append(arg)
        instruction = {"op": "run", "id": None, "fn": {"$ref": fn_id}, "args": wire_args}
        return Register(self._commit(instruction, id, "run"))

    def _check_key(self, key: object) -> str:
        if not isinstance(key, str) or not key:
            raise ValueError(f"return key must be a non-empty string, got {key!r}")
        if key in self._return_keys:
            raise ValueError(f"duplicate return key {key!r}")
        return key

    def return_(self, *, key: str, value: object) -> None:
        """Return the value of a handle under ``key``."""
        self._check_key(key)
        ref = self._known(value, "value")
        self._return_keys.add(key)
        self._instructions.append({"op": "return", "key": key, "value": {"$ref": ref}})

    def _return_path(self, kind: str, key: str, path: object) -> None:
        self._check_key(key)
        if isinstance(path, Register):
            wire_path: Any = {"$ref": self._known(path, "path")}
        elif isinstance(path, str):
            wire_path = normalize_remote_path(path)
        else:
            raise TypeError(f"path must be a str or a Register, not {type(path).__name__}")
        self._return_keys.add(key)
        self._instructions.append({"op": "return", "key": key, "kind": kind, "path": wire_path})

    def return_file(self, *, key: str, path: str | Register) -> None:
        """Return the workspace file at ``path`` under ``key``."""
        self._return_path("file", key, path)

    def return_folder(self, *, key: str, path: str | Register) -> None:
        """Return the workspace folder at ``path`` under ``key``."""
        self._return_path("folder", key, path)

    # ------------------------------------------------------------ accessors
    @property
    def instructions(self) -> list[dict[str, Any]]:
        """Shallow copy of the wire instruction list (the dicts are shared).
        Large blobs not named yet are hashed here (a client names them when
        it executes the program, often without hashing: blob_names.py)."""
        self._name_blobs(blob_names.sha256_of)
        return list(self._instructions)

    def __len__(self) -> int:
        return len(self._instructions)

    def __repr__(self) -> str:
        blobs = len(self._blobs) + len(self._unnamed)
        return f"Program(instructions={len(self._instructions)}, blobs={blobs})"


def walk_regular_files(
    root: str,
    root_st: os.stat_result,
    *,
    seen: set[tuple[int, int]],
    refusals: Mapping[str, str],
    error: Callable[[str], Exception],
    skipped: Container[str] = (),
    prefix: str = "",
) -> Iterator[tuple[str, str, os.stat_result]]:
    """(`prefix`/path below `root`, local path, lstat result) of each regular
    file below the directory `root` (`root_st` its lstat result),
    entries in name order and directories depth first, never following a
    symlink; directories named in `skipped` are left out. Raises
    ``error(refusals[what].format(local path))`` for a symlink (what:
    "symlink"), a special file ("special") or a directory already in `seen`
    ("repeated", by device and inode; each directory walked is added).
    Program.upload_folder and `kcoral run --send` (tools/packing.py) read
    folders with it."""
    key = (root_st.st_dev, root_st.st_ino)
    if key in seen:
        raise error(refusals["repeated"].format(root))
    seen.add(key)
    with os.scandir(root) as entries:
        listed = sorted(entries, key=lambda entry: entry.name)
    for entry in listed:
        local = os.path.join(root, entry.name)
        rel = f"{prefix}/{entry.name}" if prefix else entry.name
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            raise error(refusals["symlink"].format(local))
        if stat.S_ISDIR(st.st_mode):
            if entry.name not in skipped:
                yield from walk_regular_files(
                    local, st, seen=seen, refusals=refusals, error=error, skipped=skipped, prefix=rel
                )
        elif stat.S_ISREG(st.st_mode):
            yield rel, local, st
        else:
            raise error(refusals["special"].format(local))


def _read_stable(local: str, before: os.stat_result) -> bytes:
    """Read a regular file without following symlinks and reject it if it
    changed (identity, size or mtime) while being read."""
    fd = os.open(local, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise ValueError(f"file {local!r} changed while being read")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if (
        after.st_size != st.st_size
        or after.st_mtime_ns != st.st_mtime_ns
        or len(data) != st.st_size
        or before.st_size != st.st_size
        or before.st_mtime_ns != st.st_mtime_ns
    ):
        raise ValueError(f"file {local!r} changed while being read")
    return data
