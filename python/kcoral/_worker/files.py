"""Workspace files: materializing `file` uploads and collecting file/folder
returns without ever following a symlink (spec/protocol.md §2.4, §2.7)."""

import contextlib
import os
import stat

from kcoral._worker.errors import InstructionFailure
from kcoral.artifacts import normalize_remote_path as normalize_path  # noqa: F401 - the client's rules, for the engine

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@contextlib.contextmanager
def _directory(workspace: str, components: list[str], create: bool):
    """The workspace directory `components` below the root, walked one level at
    a time without following symlinks (created 0700 when `create`)."""
    fd = os.open(workspace, _DIR_FLAGS)
    try:
        for name in components:
            if create:
                try:
                    os.mkdir(name, 0o700, dir_fd=fd)
                except FileExistsError:
                    pass
            next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
        yield fd
    finally:
        os.close(fd)


def write_upload(workspace: str, path: str, data) -> None:
    *parents, name = path.split("/")
    try:
        with _directory(workspace, parents, create=True) as parent:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            with os.fdopen(os.open(name, flags, 0o600, dir_fd=parent), "wb") as f:
                f.write(data)
    except OSError as exc:
        raise InstructionFailure("runtime", f"cannot write uploaded file {path!r}: {exc}") from None


def _read_regular(dir_fd: int, name: str, budget_left: int, shown: str) -> bytes:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise InstructionFailure("serialization", f"{shown!r} is not a regular file")
        if budget_left and before.st_size > budget_left:
            raise InstructionFailure("serialization", f"{shown!r} exceeds the response budget")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        data = b"".join(chunks)
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns) != (before.st_size, before.st_mtime_ns) or len(data) != after.st_size:
            raise InstructionFailure("serialization", f"{shown!r} changed while it was read")
        return data
    finally:
        os.close(fd)


def collect_file(workspace: str, path: str, budget_left: int) -> bytes:
    *parents, name = path.split("/")
    try:
        with _directory(workspace, parents, create=False) as parent:
            return _read_regular(parent, name, budget_left, path)
    except OSError as exc:
        raise InstructionFailure("serialization", f"cannot return file {path!r}: {exc.strerror}") from None


def collect_folder(workspace: str, path: str, budget_left: int) -> tuple[dict[str, bytes], list[str]]:
    """Files (relative path -> bytes) and every directory below `path`."""
    files: dict[str, bytes] = {}
    directories: list[str] = []
    seen: set[tuple[int, int]] = set()
    used = 0

    def walk(dir_fd: int, prefix: str) -> None:
        nonlocal used
        st = os.fstat(dir_fd)
        if (st.st_dev, st.st_ino) in seen:
            raise InstructionFailure("serialization", f"directory {prefix or path!r} repeats")
        seen.add((st.st_dev, st.st_ino))
        for name in sorted(os.listdir(dir_fd)):
            rel = f"{prefix}{name}"
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                directories.append(rel)
                child = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
                try:
                    walk(child, rel + "/")
                finally:
                    os.close(child)
            elif stat.S_ISREG(st.st_mode):
                left = budget_left - used if budget_left else 0
                if budget_left and left <= 0 and st.st_size > 0:
                    raise InstructionFailure("serialization", f"{rel!r} exceeds the response budget")
                files[rel] = _read_regular(dir_fd, name, left, rel)
                used += len(files[rel])
            else:
                kind = "symlink" if stat.S_ISLNK(st.st_mode) else "special file"
                raise InstructionFailure("serialization", f"{rel!r} is a {kind}")

    try:
        with _directory(workspace, path.split("/"), create=False) as folder:
            walk(folder, "")
    except OSError as exc:
        raise InstructionFailure("serialization", f"cannot return folder {path!r}: {exc.strerror}") from None
    return files, sorted(directories)
