"""Which certificates the clients trust for https URLs, and what a failed TLS
connection is reported as (issue 27).

Trust, first match wins: the client's ``ca`` argument (``kcoral run --ca``), a
PEM bundle; else the bundle that ``$KCORAL_CA_BUNDLE`` names; else httpx's
default, the public roots of certifi (or ``$SSL_CERT_FILE``/``$SSL_CERT_DIR``
where set). Python's default context is used for a bundle: TLS 1.2 or later,
the certificate checked against the host name.

A server whose certificate does not verify is a TransportError that says so
and names the host and what was trusted, instead of httpx's bare
``[SSL: CERTIFICATE_VERIFY_FAILED]``.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from typing import NamedTuple

import httpx

from .errors import TransportError

__all__ = ["CA_BUNDLE_ENV", "Trust", "transport_error", "trust"]

CA_BUNDLE_ENV = "KCORAL_CA_BUNDLE"


class Trust(NamedTuple):
    context: ssl.SSLContext  # shared by every connection of a client (connections.py)
    source: str  # for messages: "CA bundle /etc/kcoral/ca.pem", ...


def trust(ca: str | os.PathLike[str] | None = None, environ: Mapping[str, str] = os.environ) -> Trust:
    """The context that verifies servers; ValueError naming the bundle if it cannot be loaded."""
    if ca is not None:
        return _bundle(os.fspath(ca), f"CA bundle {os.fspath(ca)}")
    if environ.get(CA_BUNDLE_ENV):
        path = environ[CA_BUNDLE_ENV]
        return _bundle(path, f"CA bundle {path} (${CA_BUNDLE_ENV})")
    return Trust(httpx.create_ssl_context(), "the default roots (certifi, or $SSL_CERT_FILE)")


def _bundle(path: str, source: str) -> Trust:
    try:
        return Trust(ssl.create_default_context(cafile=path), source)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{source}: cannot be loaded: {exc}") from None


def transport_error(what: str, url: str, exc: Exception, trusted: Trust) -> TransportError:
    """The TransportError for request `what` ("GET /health") to `url` that failed with `exc`."""
    failure = _ssl_cause(exc)
    if isinstance(failure, ssl.SSLCertVerificationError):
        host = httpx.URL(url).netloc.decode("ascii", "replace")
        return TransportError(
            f"{what} failed: TLS verification failed for {host}: {failure.verify_message} "
            f"(trusting {trusted.source})"
        )
    if failure is not None:
        host = httpx.URL(url).netloc.decode("ascii", "replace")
        return TransportError(f"{what} failed: TLS handshake with {host} failed: {failure.reason or failure}")
    return TransportError(f"{what} failed: {exc}")


def _ssl_cause(exc: BaseException) -> ssl.SSLError | None:
    """The ssl error under httpx's and httpcore's wrappers, if one is there."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, ssl.SSLError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None
