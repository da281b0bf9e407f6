"""The libraries `compile` built in this session, by the SHA-256 of their bytes.

`evaluate` and `run` name a library by that hash; its bytes go with the program under the same
name, and a server that already holds blobs of that hash sends none back for them (the client's
cache negotiation), so the hash is the handle and the bytes stay here in case the server evicted
them. Bounded, oldest first out: a long session cannot grow without end."""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

MAX_LIBRARIES = 64
MAX_BYTES = 1 << 30


class Libraries:
    def __init__(self, max_libraries: int = MAX_LIBRARIES, max_bytes: int = MAX_BYTES) -> None:
        self._items: OrderedDict[str, bytes] = OrderedDict()
        self._max_libraries, self._max_bytes = max_libraries, max_bytes
        self._lock = threading.Lock()  # tools run their client calls on worker threads

    def add(self, library: bytes) -> str:
        digest = hashlib.sha256(library).hexdigest()
        with self._lock:
            self._items[digest] = library
            self._items.move_to_end(digest)
            while len(self._items) > self._max_libraries or (
                len(self._items) > 1 and sum(map(len, self._items.values())) > self._max_bytes
            ):
                self._items.popitem(last=False)
        return digest

    def get(self, digest: str) -> bytes | None:
        with self._lock:
            return self._items.get(digest)

    def __len__(self) -> int:
        return len(self._items)
