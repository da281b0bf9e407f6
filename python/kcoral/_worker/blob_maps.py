"""Uploaded blobs as the worker sees them: sealed memfds of the server's
blob store, mapped, never copied (DESIGN.md "Data path", issue 11).

A sealed memfd can be written by no one, so every use reads the same pages:
a read-only shared mapping for values that are only read, and a private
(copy-on-write) mapping for a host tensor the program may write, so that
its writes cost only the pages it touches and never reach the blob.
"""

from __future__ import annotations

import mmap
import os

#: A ``bytes`` upload at least this large reaches user code as a read-only
#: memoryview of the mapping instead of a copy (docs/data-path.md "In the worker").
VIEW_BYTES = 1 << 20


class MappedBlob:
    def __init__(self, fd: int):
        self._fd = fd
        self.size = os.fstat(fd).st_size
        self._view: memoryview | None = None

    def view(self) -> memoryview:
        """The bytes, read-only; one shared mapping for every use."""
        if self._view is None:
            if self.size == 0:
                self._view = memoryview(b"")
            else:
                self._view = memoryview(mmap.mmap(self._fd, self.size, prot=mmap.PROT_READ))
        return self._view

    def private(self) -> memoryview:
        """A writable copy-on-write mapping of its own."""
        if self.size == 0:
            return memoryview(bytearray())
        return memoryview(mmap.mmap(self._fd, self.size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE))

    def bytes_value(self):
        """A ``bytes`` upload's value: a copy when small, the mapping when large."""
        view = self.view()
        return view if self.size >= VIEW_BYTES else bytes(view)

    @property
    def fd(self) -> int:
        return self._fd

    def close(self) -> None:
        """The mappings outlive the descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
