"""What the clients trust for https URLs (kcoral/tls.py), and how a TLS
failure reads; no server (tests/e2e/test_tls.py runs real ones). Not named
test_tls.py: tests/e2e has that name, and `make e2e` collects both folders."""

from __future__ import annotations

import ssl
import sys
from pathlib import Path

import httpx
import pytest

from kcoral import TransportError
from kcoral.tls import transport_error, trust

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
from pki import make_pki  # noqa: E402


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Path:
    return make_pki(tmp_path_factory.mktemp("pki")).ca


def test_ca_wins_over_the_variable_which_wins_over_the_default_roots(ca, tmp_path):
    other = tmp_path / "elsewhere.pem"
    assert trust(ca, environ={"KCORAL_CA_BUNDLE": str(other)}).source == f"CA bundle {ca}"
    variable = trust(environ={"KCORAL_CA_BUNDLE": str(ca)})
    assert variable.source == f"CA bundle {ca} ($KCORAL_CA_BUNDLE)"
    assert [c["subject"] for c in variable.context.get_ca_certs()] == [((("commonName", "kcoral test CA"),),)]
    default = trust(environ={})
    assert default.source.startswith("the default roots") and len(default.context.get_ca_certs()) > 100
    assert variable.context.minimum_version >= ssl.TLSVersion.TLSv1_2 and variable.context.check_hostname


def test_a_bundle_that_cannot_be_loaded_is_a_value_error_naming_it(tmp_path):
    with pytest.raises(ValueError, match=f"CA bundle {tmp_path / 'absent.pem'}: cannot be loaded"):
        trust(tmp_path / "absent.pem")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not PEM")
    with pytest.raises(ValueError, match=r"\$KCORAL_CA_BUNDLE\): cannot be loaded"):
        trust(environ={"KCORAL_CA_BUNDLE": str(garbage)})


def wrapped(cause: BaseException) -> httpx.ConnectError:
    """As httpx raises it: its ConnectError from httpcore's, from the ssl error."""
    try:
        try:
            raise cause
        except BaseException as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        return outer


def test_a_certificate_that_does_not_verify_says_so_and_names_the_host(ca):
    failure = ssl.SSLCertVerificationError(1, "certificate verify failed")
    failure.verify_message = "unable to get local issuer certificate"
    error = transport_error("GET /health", "https://gpu.example:8001", wrapped(failure), trust(ca))
    assert isinstance(error, TransportError)
    assert str(error) == (
        "GET /health failed: TLS verification failed for gpu.example:8001: "
        f"unable to get local issuer certificate (trusting CA bundle {ca})"
    )
    other = transport_error("GET /health", "http://h:1", httpx.ConnectError("refused"), trust(ca))
    assert str(other) == "GET /health failed: refused"
