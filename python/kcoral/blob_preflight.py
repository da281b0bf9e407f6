"""Large blobs sent ahead of their program (docs/data-path.md "Blob endpoints").

Before it executes a program, the client settles each large blob (at least
blob_names.LARGE_BLOB_BYTES) with the server: one it has not named yet is
sent with ``POST /blobs`` and the server names it while it receives it (no
hash on the client); one it has named is asked for with ``HEAD
/blobs/<sha256>`` and sent only if missing. The program then goes alone, so
a cold upload costs one transfer and no CACHE_MISS round trip.

A server without these endpoints (the reference) answers 404 or 405 without
our marker; the client then hashes locally and falls back to the three-attempt
negotiation of protocol §3.3, which stays as it was.

The preflight does no I/O itself: `BlobPreflight.settle` is a generator of
steps (steps.py) that yields its HEAD and POST requests, so the blocking
and the async client drive the same code.
"""

from __future__ import annotations

import json
from typing import Any

from . import blob_names
from .errors import ProtocolError
from .steps import Request, Steps

__all__ = ["BlobPreflight"]

#: Set on every answer of our blob endpoints: a bare 404 means "no endpoint".
MARKER_HEADER = "X-KCoral-Blob"
CLAIM_HEADER = "X-KCoral-Blob-SHA256"


class BlobPreflight:
    """Per server URL of a client: whether that server has blob endpoints,
    learned once. One per URL, since the entry nodes of a cluster may differ
    (a reference node among ours) and each keeps its own blobs.

    Shared by the requests a client has in flight to that URL; they only ever
    learn the same answer, so racing writes of ``supported`` are harmless.
    """

    def __init__(self) -> None:
        self.supported: bool | None = None  # None: not asked yet

    def settle(self, program) -> Steps[Any]:
        """Names and sends ahead the program's large blobs; returns the digests
        that must still travel inline (the server could not keep them)."""
        inline: set[str] = set()
        sent: set[str] = set()
        names: dict[int, str] = {}  # id(bytes) -> digest; the program holds the bytes
        for data in [data for data, _ in program._unnamed]:
            names[id(data)] = yield from self._name(data, sent, inline)
        # A blob another thread named meanwhile (the same Program executed
        # twice at once) is not in `names`; its memo entry names it.
        program._name_blobs(lambda data: names.get(id(data)) or blob_names.sha256_of(data))
        for digest, data in list(program._blobs.items()):
            if self.supported is False:
                break
            if len(data) < blob_names.LARGE_BLOB_BYTES or digest in sent:
                continue
            present = yield from self._present(digest)
            if present is None:
                break
            if not present:
                _, kept = yield from self._upload(data, digest)
                if not kept:
                    inline.add(digest)
        return inline

    def _name(self, data: bytes, sent: set[str], inline: set[str]) -> Steps[Any]:
        if self.supported is False:
            return blob_names.sha256_of(data)
        # Named since the program was built (by another program with the same
        # bytes, or an earlier call that failed): the lookup below checks it.
        known = blob_names.known_name(data)
        if known is not None:
            return known
        digest, kept = yield from self._upload(data, None)
        if digest is None:  # no endpoint after all
            return blob_names.sha256_of(data)
        sent.add(digest)
        if not kept:
            inline.add(digest)
        return digest

    def _present(self, digest: str) -> Steps[Any]:
        """HEAD /blobs/<digest>: True or False, or None without the endpoint."""
        response = yield Request("HEAD", f"/blobs/{digest}")
        if MARKER_HEADER not in response.headers:
            self.supported = False
            return None
        self.supported = True
        return response.status_code == 200

    def _upload(self, data: bytes, claimed: str | None) -> Steps[Any]:
        """POST /blobs; returns (digest, kept), or (None, False) without the endpoint."""
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(data))}
        if claimed is not None:
            headers[CLAIM_HEADER] = claimed
        response = yield Request("POST", "/blobs", headers, [data])
        if MARKER_HEADER not in response.headers:
            self.supported = False
            return None, False
        self.supported = True
        try:
            body = json.loads(response.content)
            digest, kept, size = body["sha256"], body["cached"], body["size"]
        except (ValueError, KeyError, TypeError):
            raise ProtocolError(f"POST /blobs answered {response.status_code} without a blob") from None
        if response.status_code != 200 or size != len(data) or (claimed and digest != claimed):
            raise ProtocolError(f"POST /blobs answered {response.status_code}: {body!r}"[:500])
        if not isinstance(digest, str) or len(digest) != 64:
            raise ProtocolError("POST /blobs named the blob with a malformed digest")
        blob_names.remember(data, digest)
        return digest, bool(kept)
