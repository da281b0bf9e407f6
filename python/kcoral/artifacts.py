"""Files and folders returned by ``return_file`` / ``return_folder`` (protocol §5.5),
and the remote path rules shared with :mod:`kcoral.program` (protocol §2.4)."""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

__all__ = ["ReturnedFile", "ReturnedFolder", "normalize_remote_path", "validate_manifest"]

MAX_COMPONENT_BYTES = 255
MAX_PATH_BYTES = 4096


def normalize_remote_path(path: object) -> str:
    """Validate and normalize a workspace-relative path the way the server does.

    Rejects non-strings, empty strings, NUL, backslash, a leading ``/`` and any
    raw ``..`` component (checked before normalization). Drops empty and ``.``
    components. Each component is at most 255 UTF-8 bytes and the whole
    normalized path at most 4096.
    """
    if not isinstance(path, str):
        raise TypeError(f"path must be a str, not {type(path).__name__}")
    if not path:
        raise ValueError("path must be a non-empty string")
    if "\x00" in path:
        raise ValueError(f"path {path!r} contains a NUL character")
    if "\\" in path:
        raise ValueError(f"path {path!r} contains a backslash")
    if path.startswith("/"):
        raise ValueError(f"path {path!r} must be relative")
    raw = path.split("/")
    if ".." in raw:
        raise ValueError(f"path {path!r} contains a '..' component")
    parts = [p for p in raw if p not in ("", ".")]
    if not parts:
        raise ValueError(f"path {path!r} is empty after normalization")
    for part in parts:
        try:
            size = len(part.encode("utf-8"))
        except UnicodeEncodeError:
            raise ValueError(f"path {path!r} is not valid UTF-8 text") from None
        if size > MAX_COMPONENT_BYTES:
            raise ValueError(f"path component {part[:32]!r}... exceeds {MAX_COMPONENT_BYTES} bytes")
    normalized = "/".join(parts)
    if len(normalized.encode("utf-8")) > MAX_PATH_BYTES:
        raise ValueError(f"path exceeds {MAX_PATH_BYTES} bytes")
    return normalized


def _ancestors(path: str) -> Iterable[str]:
    idx = path.find("/")
    while idx >= 0:
        yield path[:idx]
        idx = path.find("/", idx + 1)


def validate_manifest(files: Iterable[str], directories: Iterable[str]) -> None:
    """Check a folder manifest (protocol §4.2): canonical relative paths, each
    list sorted without duplicates, no file/directory conflicts, and every
    ancestor of every file and directory listed in ``directories``.

    Raises ``ValueError`` on violation.
    """
    files = list(files)
    directories = list(directories)
    for kind, entries in (("file", files), ("directory", directories)):
        for entry in entries:
            if not isinstance(entry, str):
                raise ValueError(f"{kind} entry {entry!r} is not a string")
            try:
                canonical = normalize_remote_path(entry)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"invalid {kind} path {entry!r}: {exc}") from None
            if canonical != entry:
                raise ValueError(f"{kind} path {entry!r} is not canonical")
        for a, b in zip(entries, entries[1:]):
            if not a < b:
                raise ValueError(f"{kind} paths are not sorted without duplicates ({a!r} before {b!r})")
    dir_set = set(directories)
    for entry in files:
        if entry in dir_set:
            raise ValueError(f"{entry!r} is both a file and a directory")
    for entry in files + directories:
        for parent in _ancestors(entry):
            if parent not in dir_set:
                raise ValueError(f"ancestor directory {parent!r} of {entry!r} is not listed")


def _check_local_dest(dest: object) -> Path:
    if not isinstance(dest, (str, os.PathLike)):
        raise TypeError(f"dest must be a str or os.PathLike, not {type(dest).__name__}")
    path = Path(os.fspath(dest))
    if isinstance(os.fspath(dest), bytes):
        raise TypeError("dest must be a text path")
    if ".." in path.parts:
        raise ValueError(f"refusing destination containing '..': {str(path)!r}")
    if path.name in ("", ".", ".."):
        raise ValueError(f"destination {str(path)!r} has no file name")
    return path


def _open_parent(path: Path) -> int:
    """Open the parent directory of ``path`` without following a symlink at its
    last component."""
    parent = path.parent
    try:
        return os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, "parent directory does not exist", str(parent)) from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise NotADirectoryError(
                errno.ENOTDIR, "parent is not a directory (symlinks are not followed)", str(parent)
            ) from None
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _lstat_at(name: str, dir_fd: int) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


class ReturnedFile:
    """The bytes of one file returned by the server."""

    __slots__ = ("_data",)

    def __init__(self, data: bytes) -> None:
        if not isinstance(data, bytes):
            data = bytes(data)
        self._data = data

    @property
    def size(self) -> int:
        return len(self._data)

    def read_bytes(self) -> bytes:
        return self._data

    def save(self, dest: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the file to ``dest`` atomically and return ``dest`` as a Path.

        The parent directory must exist. Paths containing ``..`` are refused and
        symlinks are never followed: neither a symlink at ``dest`` nor at its
        parent's last component. Without ``overwrite`` an existing ``dest`` is
        an error; with it, only a regular file may be replaced.
        """
        path = _check_local_dest(dest)
        name = path.name
        dir_fd = _open_parent(path)
        try:
            existing = _lstat_at(name, dir_fd)
            if existing is not None:
                if not overwrite:
                    raise FileExistsError(errno.EEXIST, "destination exists", str(path))
                if not stat.S_ISREG(existing.st_mode):
                    raise FileExistsError(errno.EEXIST, "destination exists and is not a regular file", str(path))
            tmp = f".{name[:200]}.kcoral-{secrets.token_hex(8)}.tmp"
            fd = os.open(
                tmp,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o666,
                dir_fd=dir_fd,
            )
            try:
                try:
                    _write_all(fd, self._data)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if overwrite:
                    current = _lstat_at(name, dir_fd)
                    if current is not None and not stat.S_ISREG(current.st_mode):
                        raise FileExistsError(errno.EEXIST, "destination exists and is not a regular file", str(path))
                    os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                else:
                    try:
                        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
                    except FileExistsError:
                        raise FileExistsError(errno.EEXIST, "destination exists", str(path)) from None
                    except OSError as exc:
                        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                            raise
                        # File system without hard links: best-effort rename.
                        if _lstat_at(name, dir_fd) is not None:
                            raise FileExistsError(errno.EEXIST, "destination exists", str(path)) from None
                        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            finally:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
        finally:
            os.close(dir_fd)
        return path

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ReturnedFile):
            return self._data == other._data
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ReturnedFile(size={len(self._data)})"


class ReturnedFolder:
    """A folder returned by the server: ``files`` maps canonical relative paths
    to :class:`ReturnedFile`; ``directories`` lists every directory (sorted)."""

    __slots__ = ("_files", "_directories")

    def __init__(self, files: Mapping[str, ReturnedFile], directories: Iterable[str] = ()) -> None:
        ordered = dict(sorted(files.items()))
        for key, value in ordered.items():
            if not isinstance(value, ReturnedFile):
                raise TypeError(f"files[{key!r}] is not a ReturnedFile")
        dirs = tuple(sorted(directories))
        validate_manifest(ordered.keys(), dirs)
        self._files = MappingProxyType(ordered)
        self._directories = dirs

    @property
    def files(self) -> Mapping[str, ReturnedFile]:
        return self._files

    @property
    def directories(self) -> tuple[str, ...]:
        return self._directories

    def save(self, dest: str | os.PathLike[str]) -> Path:
        """Recreate the folder at ``dest``, which must not exist yet (its parent
        must). Symlinks are never followed; on failure the partial output is
        removed."""
        path = _check_local_dest(dest)
        parent_fd = _open_parent(path)
        try:
            os.mkdir(path.name, 0o777, dir_fd=parent_fd)
            try:
                root_fd = os.open(
                    path.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=parent_fd,
                )
                try:
                    self._populate(root_fd)
                finally:
                    os.close(root_fd)
            except BaseException:
                _remove_tree_at(parent_fd, path)
                raise
        finally:
            os.close(parent_fd)
        return path

    def _populate(self, root_fd: int) -> None:
        dir_fds: dict[str, int] = {"": root_fd}
        try:
            for directory in self._directories:  # sorted, so parents come first
                head, _, name = directory.rpartition("/")
                os.mkdir(name, 0o777, dir_fd=dir_fds[head])
                dir_fds[directory] = os.open(
                    name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=dir_fds[head],
                )
            for file_path, returned in self._files.items():
                head, _, name = file_path.rpartition("/")
                fd = os.open(
                    name,
                    os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                    0o666,
                    dir_fd=dir_fds[head],
                )
                try:
                    _write_all(fd, returned.read_bytes())
                finally:
                    os.close(fd)
        finally:
            for key, fd in dir_fds.items():
                if key:
                    os.close(fd)

    def __repr__(self) -> str:
        return f"ReturnedFolder(files={len(self._files)}, directories={len(self._directories)})"


def _remove_tree_at(parent_fd: int, path: Path) -> None:
    # shutil.rmtree never follows symlinks; dir_fd exists from Python 3.11 on.
    try:
        if sys.version_info >= (3, 11):
            shutil.rmtree(path.name, dir_fd=parent_fd)
        else:
            shutil.rmtree(path)
    except OSError:
        pass
