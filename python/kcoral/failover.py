"""Entry nodes, retries and idempotency keys of Client and AsyncClient
(issue 26 item 5; docs/cluster.md "Idempotent retries").

A client holds one URL or a cluster's entry nodes. Each execute() carries an
``Idempotency-Key``. An attempt that gets no HTTP response (TransportError:
refused, reset, closed mid-request) or a 502/503 is retried whole on the next
URL, round-robin from the failed one, with the same key, after a backoff of
0.1 s doubling to 2 s, until ``max_attempts``. The retry starts a fresh
exchange (blob preflight and CACHE_MISS negotiation), since each node keeps
its own blobs. 400, 409 (the key with another program), other 4xx, FAILED
outcomes and ProtocolError are final.

The key is what makes a retry safe: a cluster node that gets it answers with
the first run's stored outcome, or waits for the run in progress, and never
runs the program twice. A server outside a cluster ignores the key, so a
retry there after the request got through (a reset mid-response) may run the
program again. The reference client never retries: when its entry node dies
it gets a transport error and the answer is lost, where ours asks another
node with the same key and gets the stored outcome.

Thread-safety: a client's Failover is shared by all its calls (Client.map
runs them on threads); its lock guards the URL in use and the retry count.
An Attempts belongs to one call.

EntryNodesClient is what Client and AsyncClient share: their constructor
(URLs, failover, TLS trust, HTTP client, blob preflights) and the
``base_url``, ``urls`` and ``retries`` properties.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .blob_preflight import BlobPreflight
from .connections import with_api_key
from .errors import KCoralError, TransportError
from .tls import trust

__all__ = ["Attempts", "EntryNodesClient", "Failover", "entry_urls", "key_or_fresh", "refuse_shared_key"]

_KEY = re.compile(r"[A-Za-z0-9._:-]{1,200}")
_RETRIED_STATUS = frozenset({502, 503})  # bad gateway, busy or shutting down: another node may answer
_FIRST_BACKOFF_SECONDS = 0.1
_MAX_BACKOFF_SECONDS = 2.0


def entry_urls(base_url: object, urls: object) -> list[str]:
    """The client's URLs, from exactly one of ``base_url`` or ``urls``."""
    if (base_url is None) == (urls is None):
        raise ValueError("give either base_url (one server) or urls (a cluster's entry nodes), not both or neither")
    if base_url is not None:
        if not isinstance(base_url, str) or not base_url:
            raise ValueError("base_url must be a non-empty string")
        return [base_url.rstrip("/")]
    listed = isinstance(urls, Sequence) and not isinstance(urls, (str, bytes))  # a str is a URL, not a list
    if not listed or not urls or not all(isinstance(u, str) and u for u in urls):
        raise ValueError(f"urls must be a non-empty list of non-empty URL strings, got {urls!r}"[:300])
    return [u.rstrip("/") for u in urls]


def key_or_fresh(key: object) -> str:
    """``key`` checked, or a fresh random one for None."""
    if key is None:
        return secrets.token_hex(16)
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise ValueError(f"idempotency_key must be 1..200 characters of A-Z a-z 0-9 . _ : -, got {key!r}"[:300])
    return key


def refuse_shared_key(execute_options: dict[str, Any]) -> None:
    """map(): one key for many programs would make all but the first a 409."""
    if "idempotency_key" in execute_options:
        raise TypeError("map() takes no idempotency_key: each program gets a fresh key of its own")


class Failover:
    """A client's URLs, the one in use, and how many retries its calls made."""

    def __init__(self, urls: list[str], max_attempts: object) -> None:
        if max_attempts is None:
            max_attempts = max(3, 2 * len(urls))
        if not isinstance(max_attempts, int) or isinstance(max_attempts, bool) or max_attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {max_attempts!r}")
        self.urls = tuple(urls)
        self.max_attempts = max_attempts
        self._lock = threading.Lock()
        self._current = 0  # guarded by _lock: index of the URL in use
        self._retries = 0  # guarded by _lock

    @property
    def url(self) -> str:
        with self._lock:
            return self.urls[self._current]

    @property
    def retries(self) -> int:
        with self._lock:
            return self._retries

    def attempts(self) -> Attempts:
        """An execute(): up to max_attempts, with backoff, counted in retries."""
        return Attempts(self, self.max_attempts, _FIRST_BACKOFF_SECONDS, counted=True)

    def sweep(self) -> Attempts:
        """A health(): each URL once, at once, not counted."""
        return Attempts(self, len(self.urls), 0.0, counted=False)

    def _moved_past(self, index: int, *, counted: bool) -> int:
        """Index of the URL after a failed one. The client's next calls start
        there too, unless a call that failed meanwhile moved them elsewhere."""
        following = (index + 1) % len(self.urls)
        with self._lock:
            if self._current == index:
                self._current = following
            if counted:
                self._retries += 1
        return following


class EntryNodesClient:
    """The base of Client and AsyncClient: one server's URL or a cluster's
    entry nodes with their Failover, the TLS trust of https URLs (tls.py), the
    HTTP client that a subclass opens in ``_open_http``, and a BlobPreflight per
    URL. Client's docstring says what the keywords mean."""

    def __init__(
        self,
        base_url: str | None = None,
        *,
        urls: Sequence[str] | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout_seconds: float = 10.0,
        max_attempts: int | None = None,
        ca: str | os.PathLike[str] | None = None,
        api_key: str | None = None,
    ) -> None:
        self._failover = Failover(entry_urls(base_url, urls), max_attempts)
        self._trust = trust(ca)  # https: ca, else $KCORAL_CA_BUNDLE, else the default roots
        self._http = self._open_http(with_api_key(headers, api_key), connect_timeout_seconds, self._trust.context)
        self._preflights = {url: BlobPreflight() for url in self._failover.urls}

    def _open_http(self, headers: dict[str, str], connect_timeout_seconds: float, verify: ssl.SSLContext) -> Any:
        """The httpx client (sync or async) that the subclass sends with."""
        raise NotImplementedError

    @property
    def base_url(self) -> str:
        """The URL in use, where the next call starts: the first, or the one after the last that failed."""
        return self._failover.url

    @property
    def urls(self) -> tuple[str, ...]:
        return self._failover.urls

    @property
    def retries(self) -> int:
        """Retries made by this client's execute() calls so far."""
        return self._failover.retries


class Attempts:
    """One call's attempts: the URL to try now, and what follows an error.
    Client.execute runs this loop (AsyncClient's awaits):

        attempts = failover.attempts()
        while True:
            try:
                return drive(execute_steps(...), partial(send, attempts.url))
            except (TransportError, KCoralError) as error:
                delay = attempts.retry_or_raise(error)
            time.sleep(delay)
    """

    def __init__(self, failover: Failover, limit: int, backoff_seconds: float, *, counted: bool) -> None:
        self._failover = failover
        self._limit = limit
        self._backoff_seconds = backoff_seconds
        self._counted = counted
        with failover._lock:
            self._index = failover._current
        self._tried: list[str] = []

    @property
    def url(self) -> str:
        return self._failover.urls[self._index]

    def retry_or_raise(self, error: Exception) -> float:
        """Seconds to wait before the next attempt, on the next URL. Raises
        ``error`` itself when it is final, or, when the attempts are spent,
        an error of its kind that says how many were made and where."""
        if not _retried(error):
            raise error
        self._tried.append(self.url)
        spent = len(self._tried) >= self._limit
        self._index = self._failover._moved_past(self._index, counted=self._counted and not spent)
        if spent:
            if len(self._tried) == 1:
                raise error
            raise _spent(error, self._tried) from error
        delay = self._backoff_seconds
        self._backoff_seconds = min(2 * delay, _MAX_BACKOFF_SECONDS)
        return delay


def _retried(error: Exception) -> bool:
    if isinstance(error, KCoralError):
        return error.status_code in _RETRIED_STATUS
    return isinstance(error, TransportError)


def _spent(error: Exception, tried: list[str]) -> Exception:
    where = f"after {len(tried)} attempts, on {', '.join(tried)}"
    if isinstance(error, KCoralError):
        return KCoralError(
            error.status_code,
            f"{error.message} ({where})",
            kind=error.kind,
            request_id=error.request_id,
            retry_after=error.retry_after,
        )
    return TransportError(f"{error} ({where})")
