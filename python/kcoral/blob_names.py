"""Names (SHA-256 digests) of blob bytes, and the memory of the ones known.

A large blob is the costly part of an upload: hashing 256 MiB takes ~0.2 s,
about as long as sending it. So a large blob is named lazily: a server with
blob endpoints names it while it receives it (POST /blobs), and a name once
known is remembered, by the identity of the ``bytes`` object, so the next
program that uploads the same object neither hashes nor sends it again.

Only exact ``bytes`` objects are remembered: they cannot change, and the memo
holds a reference to each, so an id is never reused while it is remembered.
It holds at most 8, and at most 2 GiB of them but the newest.
Anything mutable (bytearray, arrays) is copied by Program at call time anyway.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

__all__ = ["LARGE_BLOB_BYTES", "sha256_of", "known_name", "remember"]

#: Blobs of at least this size are named lazily and preflighted (client.py).
LARGE_BLOB_BYTES = 1 << 20

# Few entries, and few bytes: each pins its bytes in memory for as long as it
# is remembered (the newest is kept whatever its size).
_MEMO_ENTRIES = 8
_MEMO_BYTES = 2 << 30
_memo: OrderedDict[int, tuple[bytes, str]] = OrderedDict()
_lock = threading.Lock()


def known_name(data: bytes) -> str | None:
    """The digest of ``data`` if it is remembered."""
    if type(data) is not bytes:
        return None
    with _lock:
        entry = _memo.get(id(data))
        if entry is None or entry[0] is not data:
            return None
        _memo.move_to_end(id(data))
        return entry[1]


def remember(data: bytes, digest: str) -> None:
    """Remembers the digest of a large ``bytes`` object."""
    if type(data) is not bytes or len(data) < LARGE_BLOB_BYTES:
        return
    with _lock:
        _memo[id(data)] = (data, digest)
        _memo.move_to_end(id(data))
        held = sum(len(kept) for kept, _ in _memo.values())
        while len(_memo) > _MEMO_ENTRIES or (held > _MEMO_BYTES and len(_memo) > 1):
            _, (dropped, _) = _memo.popitem(last=False)
            held -= len(dropped)


def sha256_of(data: bytes) -> str:
    """The digest of ``data``: remembered, or computed (and remembered)."""
    digest = known_name(data)
    if digest is None:
        digest = hashlib.sha256(data).hexdigest()
        remember(data, digest)
    return digest
