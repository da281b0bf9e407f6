"""Workspace files: materializing `file` uploads and collecting file/folder
returns without ever following a symlink (spec/protocol.md §2.4, §2.7)."""

import os
import stat

from kcoral._worker.errors import InstructionFailure
from kcoral.artifacts import normalize_remote_path as normalize_path  # the client's rules, shared

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_parent(root_fd: int, components: list[str], create: bool) -> int:
    fd = os.dup(root_fd)
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
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_upload(workspace: str, path: str, data) -> None:
    components = path.split("/")
    root_fd = os.open(workspace, _DIR_FLAGS)
    try:
        parent = _open_parent(root_fd, components[:-1], create=True)
        try:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(components[-1], flags, 0o600, dir_fd=parent)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(parent)
    except OSError as exc:
        raise InstructionFailure("runtime", f"cannot write uploaded file {path!r}: {exc}") from None
    finally:
        os.close(root_fd)


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
    components = path.split("/")
    root_fd = os.open(workspace, _DIR_FLAGS)
    try:
        parent = _open_parent(root_fd, components[:-1], create=False)
        try:
            return _read_regular(parent, components[-1], budget_left, path)
        finally:
            os.close(parent)
    except OSError as exc:
        raise InstructionFailure("serialization", f"cannot return file {path!r}: {exc.strerror}") from None
    finally:
        os.close(root_fd)


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

    root_fd = os.open(workspace, _DIR_FLAGS)
    try:
        folder_fd = _open_parent(root_fd, path.split("/"), create=False)
        try:
            walk(folder_fd, "")
        finally:
            os.close(folder_fd)
    except OSError as exc:
        raise InstructionFailure("serialization", f"cannot return folder {path!r}: {exc.strerror}") from None
    finally:
        os.close(root_fd)
    return files, sorted(directories)
