"""`kcoral mcp`: serve KCoral's tools to an agent over MCP, on stdio (what an agent that starts
the command speaks) or on streamable HTTP (--http HOST:PORT, for one that connects to a URL)."""

from __future__ import annotations

import argparse
import os
import sys

DESCRIPTION = """Serve KCoral's tools (target, compile, evaluate, run, usage) over the Model Context
Protocol. It is a client of a KCoral server or cluster: every tool is a request of the HTTP API,
so the server's keys, quotas and benchmark defences hold. The API key is read from the
environment (KCORAL_API_KEY), never from the command line, where other users could read it.

An agent's configuration (stdio):
  {"mcpServers": {"kcoral": {"command": "kcoral", "args": ["mcp", "--url", "http://gpu:8001"],
                             "env": {"KCORAL_API_KEY": "kc_..."}}}}
docs/mcp.md has the tools and a session."""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kcoral mcp", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--url",
        action="append",
        metavar="URL",
        help="the KCoral server, or one entry node of a cluster; repeat it for each entry node (the client "
        "fails over between them). Default: $KCORAL_URL, else http://127.0.0.1:8000",
    )
    parser.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio, e.g. 127.0.0.1:8765. "
        "It has no authentication of its own: anyone who reaches it uses this process's API key, so "
        "keep it on 127.0.0.1 unless something in front of it checks callers",
    )
    parser.add_argument(
        "--timeout-seconds",
        type=float,
        help="the server-side limit of a compile, evaluate or run that gives none (default: the server's "
        "--default-timeout-seconds; the server caps either at its --max-timeout-seconds)",
    )
    parser.add_argument(
        "--ca",
        metavar="PEM",
        help="CA bundle that an https server's certificate verifies against (default $KCORAL_CA_BUNDLE, else the "
        "system's roots)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="what the MCP server logs on stderr (default WARNING; stdout is the protocol's on stdio)",
    )
    return parser.parse_args(argv)


def http_address(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise SystemExit(f"kcoral mcp: --http {value!r}: give HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


def main(argv: list[str]) -> int:
    options = parse(argv)
    address = http_address(options.http) if options.http else None
    if options.timeout_seconds is not None and not 0 < options.timeout_seconds <= 3600:
        raise SystemExit("kcoral mcp: --timeout-seconds must be in (0, 3600]")
    urls = options.url or [os.environ.get("KCORAL_URL", "http://127.0.0.1:8000")]

    from kcoral.client import Client

    from .server import build_server

    client = Client(urls=urls, ca=options.ca)
    server = build_server(client, timeout_seconds=options.timeout_seconds, log_level=options.log_level)
    try:
        if address is None:
            server.run("stdio")
        else:
            host, port = address
            print(f"kcoral mcp: serving http://{host}:{port}/mcp for {', '.join(urls)}", file=sys.stderr, flush=True)
            server.run("streamable-http", host=host, port=port)
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
    return 0
