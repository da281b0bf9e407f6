"""A throwaway PKI made with the `openssl` command at test time (issue 27): a
CA, and a server certificate it signs for 127.0.0.1 and localhost. EC P-256
keys (fast handshakes), valid two days; nothing is kept in the tree.

Used by tests/e2e/test_tls.py and bench/tls_cost.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import NamedTuple

SERVER_EXTENSIONS = """\
basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost
authorityKeyIdentifier=keyid
subjectKeyIdentifier=hash
"""
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


class Pki(NamedTuple):
    ca: Path  # the CA's certificate: what a client trusts
    cert: Path  # the server's certificate (--tls-cert)
    key: Path  # its private key (--tls-key)


def openssl(*args: str, cwd: Path) -> None:
    run = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {run.stderr}")


def make_pki(directory: Path, name: str = "kcoral test") -> Pki:
    """A CA named `name` and a server certificate it signed, in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    openssl(
        "req", "-x509", "-new", *EC, "-keyout", "ca.key", "-out", "ca.crt", "-days", "2",
        "-subj", f"/CN={name} CA", "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory,
    )  # fmt: skip
    (directory / "server.ext").write_text(SERVER_EXTENSIONS)
    openssl("req", "-new", *EC, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=directory)
    openssl(
        "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", "1",
        "-days", "2", "-out", "server.crt", "-extfile", "server.ext", cwd=directory,
    )  # fmt: skip
    return Pki(directory / "ca.crt", directory / "server.crt", directory / "server.key")
