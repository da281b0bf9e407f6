"""A lazy FUSE store for the power-loss schedules (bench/cluster_faults.py), after Jepsen's
LazyFS: a passthrough to a backing folder that keeps every write in memory, as a page cache
would, until the file is fsynced; a power cut (`LazyStore.cut_power()`: SIGKILL the FUSE
process, detach the mount) drops whatever was written and never synced.

    store = LazyStore(backing, mountpoint, log)   # mounts: a process of its own
    store.cut_power()                             # unsynced writes gone, mount detached
    store.mount()                                 # the backing folder again, as synced
    store.unmount()                               # at the end (and at exit)

What a cut keeps: file data up to each file's last fsync; names (create, rename, unlink, mkdir)
at once, as a journaling file system with ordered metadata commits would after its next
commit. So it models lost page-cache data, not torn renames.

Run as a script (`python3 lazy_store.py BACKING MOUNTPOINT`), it is the FUSE process. Needs
/dev/fuse, Debian fuse3 (libfuse3, fusermount3) and PyPI mfusepy.
"""

from __future__ import annotations

import atexit
import errno
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

PAGE = 4096


class LazyStore:
    def __init__(self, backing: Path, mountpoint: Path, log: Path):
        self.backing, self.mountpoint, self.log = backing, mountpoint, log
        backing.mkdir(parents=True, exist_ok=True)
        mountpoint.mkdir(parents=True, exist_ok=True)
        self.process: subprocess.Popen | None = None
        atexit.register(self.unmount)
        self.mount()

    @staticmethod
    def unavailable() -> str | None:
        """Why no lazy store can be mounted here, or None."""
        if not os.path.exists("/dev/fuse"):
            return "/dev/fuse is missing"
        if shutil.which("fusermount3") is None:
            return "fusermount3 not found: apt-get install fuse3"
        try:
            import mfusepy  # noqa: F401
        except (ImportError, OSError) as exc:
            return f"mfusepy cannot load libfuse ({exc}): pip install mfusepy; apt-get install fuse3"
        return None

    def mount(self, timeout: float = 15) -> None:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, __file__, str(self.backing), str(self.mountpoint)],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.unmount()
                raise RuntimeError(f"the lazy store at {self.mountpoint} did not mount: see {self.log}")
            time.sleep(0.05)

    def cut_power(self) -> None:
        """Unsynced writes gone: the FUSE process dies with them, and the dead mount goes."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None
        self._detach()

    def unmount(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()  # what it holds unsynced no longer matters
            self.process.wait()
        self.process = None
        self._detach()

    def _detach(self) -> None:
        if os.path.ismount(self.mountpoint) or _dead_mount(self.mountpoint):
            subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, check=False)
            if os.path.ismount(self.mountpoint) or _dead_mount(self.mountpoint):
                subprocess.run(["umount", "-l", str(self.mountpoint)], capture_output=True, check=False)


def _dead_mount(path: Path) -> bool:
    """A FUSE mount whose process died: stat fails with ENOTCONN."""
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


class _CachedFile:
    """A file's writes since its last fsync: whole pages, and its size as written."""

    def __init__(self, size: int):
        self.pages: dict[int, bytearray] = {}
        self.size = size
        self.backing_valid = size  # bytes of the backing file still the file's (after a truncate)


def serve(backing: str, mountpoint: str) -> None:
    import mfusepy as fuse

    lock = threading.RLock()
    cache: dict[str, _CachedFile] = {}

    def real(path: str) -> str:
        return os.path.join(backing, path.lstrip("/"))

    def errors(function):
        def wrapped(self, *args):
            try:
                with lock:
                    return function(self, *args)
            except OSError as exc:
                raise fuse.FuseOSError(exc.errno or errno.EIO) from exc

        return wrapped

    def page_of(path: str, entry: _CachedFile, index: int) -> bytearray:
        page = entry.pages.get(index)
        if page is None:
            page = bytearray(PAGE)
            start = index * PAGE
            if start < entry.backing_valid:
                with open(real(path), "rb") as f:
                    f.seek(start)
                    data = f.read(min(PAGE, entry.backing_valid - start))
                page[: len(data)] = data
            entry.pages[index] = page
        return page

    def cached(path: str) -> _CachedFile:
        entry = cache.get(path)
        if entry is None:
            size = os.lstat(real(path)).st_size
            entry = cache[path] = _CachedFile(size)
        return entry

    def truncate_cached(path: str, length: int) -> None:
        entry = cached(path)
        for index in [i for i in entry.pages if i * PAGE >= length]:
            del entry.pages[index]
        if length % PAGE and length // PAGE in entry.pages:
            page = entry.pages[length // PAGE]
            page[length % PAGE :] = bytes(PAGE - length % PAGE)
        entry.backing_valid = min(entry.backing_valid, length)
        entry.size = length

    def flush_cached(path: str) -> None:
        entry = cache.pop(path, None)
        if entry is None:
            return
        fd = os.open(real(path), os.O_WRONLY)
        try:
            os.ftruncate(fd, min(entry.backing_valid, entry.size))
            for index, page in sorted(entry.pages.items()):
                start = index * PAGE
                if start < entry.size:
                    os.pwrite(fd, bytes(page[: entry.size - start]), start)
            os.ftruncate(fd, entry.size)
            os.fsync(fd)
        finally:
            os.close(fd)

    class Lazy(fuse.Operations):
        use_ns = True

        @errors
        def getattr(self, path, fh=None):
            st = os.lstat(real(path))
            found = {key: getattr(st, key) for key in (
                "st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}  # fmt: skip
            found = {k.replace("_ns", ""): v for k, v in found.items()}
            if path in cache:
                found["st_size"] = cache[path].size
            return found

        @errors
        def readdir(self, path, fh):
            return [".", "..", *os.listdir(real(path))]

        @errors
        def access(self, path, amode):
            if not os.access(real(path), amode):
                raise fuse.FuseOSError(errno.EACCES)
            return 0

        @errors
        def mkdir(self, path, mode):
            os.mkdir(real(path), mode)
            return 0

        @errors
        def rmdir(self, path):
            os.rmdir(real(path))
            return 0

        @errors
        def unlink(self, path):
            os.unlink(real(path))
            cache.pop(path, None)
            return 0

        @errors
        def rename(self, old, new):
            os.rename(real(old), real(new))
            cache.pop(new, None)
            if old in cache:
                cache[new] = cache.pop(old)
            return 0

        @errors
        def chmod(self, path, mode):
            os.chmod(real(path), mode)
            return 0

        @errors
        def chown(self, path, uid, gid):
            os.chown(real(path), uid, gid)
            return 0

        @errors
        def utimens(self, path, times=None):
            os.utime(real(path), ns=times) if times else os.utime(real(path))
            return 0

        @errors
        def statfs(self, path):
            st = os.statvfs(real(path))
            return {key: getattr(st, key) for key in (
                "f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                "f_frsize", "f_namemax")}  # fmt: skip

        @errors
        def create(self, path, mode, fi=None):
            fd = os.open(real(path), os.O_RDWR | os.O_CREAT, mode)
            truncate_cached(path, 0)
            return fd

        @errors
        def open(self, path, flags):
            fd = os.open(real(path), os.O_RDWR if flags & os.O_ACCMODE else os.O_RDONLY)
            if flags & os.O_TRUNC:
                truncate_cached(path, 0)
            return fd

        @errors
        def read(self, path, size, offset, fh):
            entry = cache.get(path)
            if entry is None:
                return os.pread(fh, size, offset)
            end = min(offset + size, entry.size)
            out = bytearray()
            position = offset
            while position < end:
                index, within = divmod(position, PAGE)
                take = min(PAGE - within, end - position)
                out += page_of(path, entry, index)[within : within + take]
                position += take
            return bytes(out)

        @errors
        def write(self, path, data, offset, fh):
            entry = cached(path)
            position, view = offset, memoryview(data)
            while view:
                index, within = divmod(position, PAGE)
                take = min(PAGE - within, len(view))
                page_of(path, entry, index)[within : within + take] = view[:take]
                position += take
                view = view[take:]
            entry.size = max(entry.size, offset + len(data))
            return len(data)

        @errors
        def truncate(self, path, length, fh=None):
            truncate_cached(path, length)
            return 0

        @errors
        def fsync(self, path, datasync, fh):
            flush_cached(path)
            return 0

        @errors
        def fsyncdir(self, path, datasync, fh):
            fd = os.open(real(path), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            return 0

        @errors
        def flush(self, path, fh):
            return 0

        @errors
        def release(self, path, fh):
            os.close(fh)
            return 0

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    fuse.FUSE(Lazy(), mountpoint, foreground=True, nothreads=False)


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2])
