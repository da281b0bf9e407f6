"""`kcoral keys new TENANT [--role operator]`: a new API key and its line for the file of
`kcoral server --auth-keys` (docs/deploy.md). The key is printed once and never stored: the
file holds its SHA-256 only."""

from __future__ import annotations

import argparse
import hashlib
import re
import secrets

_TENANT = re.compile(r"[A-Za-z0-9._-]{1,64}")


def new_key() -> str:
    """256 random bits, URL-safe, with a prefix that says what it is (secret scanners find it)."""
    return "kc_" + secrets.token_urlsafe(32)


def key_line(tenant: str, key: str, role: str = "tenant") -> str:
    return f"{tenant} {hashlib.sha256(key.encode()).hexdigest()} {role}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="kcoral keys",
        description="Make API keys for kcoral server --auth-keys FILE. The key is shown once; "
        "append the line to the file (then SIGHUP the server, or restart it).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    new = sub.add_parser("new", help="print a new key and the line for the keys file")
    new.add_argument("tenant", help="who the key belongs to: letters, digits, '.', '_', '-'")
    new.add_argument("--role", choices=("tenant", "operator"), default="tenant",
                     help="tenant: run programs, read its own usage; operator: also /metrics and everyone's")  # fmt: skip
    args = parser.parse_args(argv)
    if not _TENANT.fullmatch(args.tenant):
        parser.error(f"tenant {args.tenant!r}: use 1-64 letters, digits, '.', '_' or '-'")
    key = new_key()
    print(f"key:  {key}")
    print(f"line: {key_line(args.tenant, key, args.role)}")
    return 0
