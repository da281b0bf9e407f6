"""`--send` paths -> one uncompressed tar, uploaded as the `inputs` bytes blob
(spec/benchmark.md §3.3).

- A file is sent under its basename; a directory keeps its name as a prefix
  (`--send experiment` gives `experiment/check.py`), as the reference's
  current code and help text do; `--send .` sends the contents of the
  current directory at the top.
- Regular files only, with mode 0700 if the owner may execute them and 0600
  otherwise. Symlinks (the named path included), special files, duplicate or
  conflicting paths, and names with a backslash or `..` are refused.
  `__pycache__` directories are skipped; other hidden files are sent; empty
  directories are not.
- The archive is deterministic (sorted, mtime 0, owner 0, PAX format), so the
  same inputs give the same blob and the server's cache can keep it.
"""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

from kcoral.program import walk_regular_files

SKIPPED_DIRECTORIES = frozenset({"__pycache__"})


class PackingError(ValueError):
    """A `--send` path that cannot be sent; the message names it."""


#: The errors of walk_regular_files, formatted with the local path.
_SEND_REFUSALS = {
    "repeated": "--send {}: the directory is sent more than once",
    "symlink": "--send: {} is a symlink (symlinks are not sent)",
    "special": "--send: {} is not a regular file or directory",
}


def _check_name(arcname: str, local: str) -> None:
    for part in arcname.split("/"):
        if part in ("", ".", ".."):
            raise PackingError(f"--send {local}: the remote path {arcname!r} has an empty or '..' component")
        if "\\" in part:
            raise PackingError(f"--send {local}: the name {part!r} contains a backslash")
    try:
        arcname.encode("utf-8")
    except UnicodeEncodeError:
        raise PackingError(f"--send {local}: the name {arcname!r} is not valid UTF-8") from None


def _read_regular(local: str, before: os.stat_result) -> bytes:
    """The file's bytes, read without following a symlink; refused if it was
    replaced or changed while being read."""
    fd = os.open(local, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
            raise PackingError(f"--send: {local} changed while being read")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if (after.st_size, after.st_mtime_ns) != (st.st_size, st.st_mtime_ns) or len(data) != st.st_size:
        raise PackingError(f"--send: {local} changed while being read")
    return data


class _Collector:
    """Remote path -> (bytes, mode), with the duplicate and conflict checks."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, int]] = {}
        self.directories: set[str] = set()
        self.seen_directories: set[tuple[int, int]] = set()

    def add_file(self, arcname: str, local: str, st: os.stat_result) -> None:
        _check_name(arcname, local)
        if arcname in self.files:
            raise PackingError(f"--send {local}: {arcname!r} is sent twice")
        if arcname in self.directories:
            raise PackingError(f"--send {local}: {arcname!r} is also a directory of another input")
        parts = arcname.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in self.files:
                raise PackingError(f"--send {local}: {arcname!r} would be below the sent file {parent!r}")
        mode = 0o700 if st.st_mode & stat.S_IXUSR else 0o600
        self.files[arcname] = (_read_regular(local, st), mode)
        for i in range(1, len(parts)):
            self.directories.add("/".join(parts[:i]))

    def add_directory(self, prefix: str, local: str, st: os.stat_result) -> None:
        for child, child_local, child_st in walk_regular_files(
            local,
            st,
            seen=self.seen_directories,
            refusals=_SEND_REFUSALS,
            error=PackingError,
            skipped=SKIPPED_DIRECTORIES,
            prefix=prefix,
        ):
            self.add_file(child, child_local, child_st)


def collect(paths: list[str]) -> dict[str, tuple[bytes, int]]:
    """Remote path -> (bytes, mode) for the `--send` paths, in order."""
    collector = _Collector()
    for local in paths:
        if not local:
            raise PackingError("--send: the path must not be empty")
        try:
            st = os.lstat(local)
        except OSError as exc:
            raise PackingError(f"--send {local}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            raise PackingError(f"--send {local}: is a symlink (symlinks are not sent; name the target)")
        name = Path(local).name
        try:
            if stat.S_ISREG(st.st_mode):
                collector.add_file(name, local, st)
            elif stat.S_ISDIR(st.st_mode):
                if name == "..":
                    raise PackingError(f"--send {local}: cannot keep the name '..'; name the directory itself")
                collector.add_directory(name, local, st)
            else:
                raise PackingError(f"--send {local}: is not a regular file or directory")
        except OSError as exc:
            raise PackingError(f"--send {local}: {exc.filename or local}: {exc.strerror}") from None
    return collector.files


def pack_inputs(paths: list[str]) -> bytes:
    """One uncompressed, deterministic tar of the `--send` paths (empty when none)."""
    files = collect(paths)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arcname in sorted(files):
            data, mode = files[arcname]
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            info.mode = mode
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
