"""The options every `kcoral run` tool shares, and their refusals (spec/benchmark.md §3.2).

`kcoral run TOOL [kcoral options] -- [native arguments]`: the first `--` is
mandatory and splits the command line before argparse sees it, so native
arguments keep their boundaries and may look like kcoral options (`--help`,
`-e`, another `--`). Every refusal names the option it is about and exits 2,
argparse's usage-error status, before anything is sent.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

from kcoral.artifacts import normalize_remote_path

DEFAULT_TIMEOUT_SECONDS = 300
DEFAULT_OUTPUT_LIMIT_BYTES = 256 * 1024 * 1024  # per stream; the reference CLI's default
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

#: Variables the worker sets itself: its GPU assignment and the inputs directory.
MANAGED_ENV = ("CUDA_VISIBLE_DEVICES", "KCORAL_DIR")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

COMMON_NOTES = """\
The server is --url URL (or URL,URL,...: a cluster's entry nodes, tried in
turn when one fails), or --host/--port, or $KCORAL_URL; an https server is
verified against --ca, else $KCORAL_CA_BUNDLE, else the default roots.
Everything after the first `--` goes to the remote command unchanged; `--send`
uploads into its working directory (also $KCORAL_DIR), `--fetch` names what to
bring back into --out. Exit status: the remote command's (128+N for signal N),
nonzero if an artifact is missing, 1 if the request failed.
"""


class UsageError(Exception):
    """A command line that `kcoral run` refuses; the message names the option."""


@dataclass
class Invocation:
    """One parsed `kcoral run TOOL ...` command line."""

    tool: str
    urls: list[str]  # one server, or a cluster's entry nodes
    timeout: int
    output_limit_bytes: int
    send: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    fetch: list[str] = field(default_factory=list)
    out: Path | None = None
    native: list[str] = field(default_factory=list)
    ca: str | None = None  # None: $KCORAL_CA_BUNDLE, else the default roots (kcoral/tls.py)


def _int(text: str) -> int:
    try:
        return int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None


def build_parser(tool: str, definition: ModuleType) -> argparse.ArgumentParser:
    """The parser of `kcoral run TOOL` (options before the first `--` only)."""
    fetch = getattr(definition, "FETCH", True)
    out_required = getattr(definition, "OUT_REQUIRED", False)
    parser = argparse.ArgumentParser(
        prog=f"kcoral run {tool}",
        usage=f"kcoral run {tool} [options] -- {definition.USAGE}",
        description=definition.DESCRIPTION,
        epilog="examples:\n" + definition.EXAMPLES + "\n" + COMMON_NOTES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add = parser.add_argument
    add(
        "--url",
        help="server URL, or a comma-separated list of a cluster's entry nodes (default: $KCORAL_URL); "
        "not with --host/--port",
    )
    add("--host", help=f"server host; builds http://HOST:PORT (default with --port: {DEFAULT_HOST})")
    add("--port", type=_int, help=f"server port (default with --host: {DEFAULT_PORT})")
    add(
        "--ca",
        metavar="PEM",
        help="CA bundle that an https server's certificate must verify against "
        "(default: $KCORAL_CA_BUNDLE, else the default roots)",
    )
    add(
        "--timeout",
        type=_int,
        default=DEFAULT_TIMEOUT_SECONDS,
        metavar="SECONDS",
        help=f"execution deadline (default: {DEFAULT_TIMEOUT_SECONDS}; the server's cap applies)",
    )
    add(
        "--output-limit-bytes",
        type=_int,
        default=DEFAULT_OUTPUT_LIMIT_BYTES,
        metavar="N",
        help=f"stdout/stderr kept per stream (default: {DEFAULT_OUTPUT_LIMIT_BYTES}; the server's cap applies)",
    )
    add(
        "--send",
        action="append",
        default=[],
        metavar="PATH",
        help="upload a file or directory into the working directory, keeping its name; repeatable",
    )
    add(
        "-e",
        "--env",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="set a remote environment variable; NAME alone copies the local value; repeatable",
    )
    if out_required:
        add("--out", required=True, metavar="DIR", help="new local directory for the report (required)")
    else:
        add("--out", metavar="DIR", help="new local directory for the --fetch artifacts")
    if fetch:
        add(
            "--fetch",
            action="append",
            default=[],
            metavar="PATH",
            help="file or directory (relative to the working directory) to bring back into --out; repeatable",
        )
    else:  # accepted only to refuse it with a reason
        add("--fetch", action="append", default=[], help=argparse.SUPPRESS)
    return parser


def split_native(argv: list[str]) -> tuple[list[str], list[str]] | None:
    """(kcoral options, native arguments) around the first `--`; None without one."""
    try:
        index = argv.index("--")
    except ValueError:
        return None
    return argv[:index], argv[index + 1 :]


def split_application(tool: str, args: list[str], usage: str) -> tuple[list[str], list[str]]:
    """(the profiler's options, the application) around the second `--` of a
    profiler tool's native arguments (ncu, run-iket); without one, ValueError
    naming the command line `kcoral run TOOL --out DIR -- {usage}`."""
    if "--" not in args:
        raise ValueError(
            f"{tool}: separate the profiler options from the application with a second '--' "
            f"(kcoral run {tool} --out DIR -- {usage})"
        )
    index = args.index("--")
    return args[:index], args[index + 1 :]


def refuse_managed_options(
    tool: str, options: list[str], long_names: tuple[str, ...], short_names: tuple[str, ...], managed: str
) -> None:
    """ValueError ("kcoral manages {managed}") for the first of a profiler's
    `options` that kcoral sets itself: one of `long_names` or a prefix of one
    (the profilers accept unambiguous prefixes), with or without `=value`, or
    one of `short_names`, alone or with its value attached."""
    for option in options:
        if option.startswith("--"):
            name = option.split("=", 1)[0]
            refused = len(name) > 2 and any(long.startswith(name) for long in long_names)
        else:
            refused = option.startswith("-") and any(option.startswith(short) for short in short_names)
        if refused:
            raise ValueError(f"{tool} {option}: kcoral manages {managed}; remove this option")


def resolve_urls(url: str | None, host: str | None, port: int | None, environ=os.environ) -> list[str]:
    if url is not None and (host is not None or port is not None):
        raise UsageError("--url cannot be combined with --host or --port")
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--port {port}: must be between 1 and 65535")
    if url is not None:
        return split_urls(url, "--url")
    if host is not None or port is not None:
        if host is not None and not host.strip():
            raise UsageError("--host: must not be empty")
        name = host if host is not None else DEFAULT_HOST
        if ":" in name and not name.startswith("["):
            name = f"[{name}]"  # an IPv6 literal
        built = f"http://{name}:{port if port is not None else DEFAULT_PORT}"
        if environ.get("KCORAL_URL"):
            print(f"kcoral: warning: --host/--port override KCORAL_URL; using {built}", file=sys.stderr)
        return [built]
    explicit = environ.get("KCORAL_URL")
    if not explicit:
        raise UsageError("no server: pass --url, --host or --port, or set KCORAL_URL")
    return split_urls(explicit, "KCORAL_URL")


def split_urls(text: str, source: str) -> list[str]:
    """``URL`` or ``URL,URL,...`` (a cluster's entry nodes); no empty entry."""
    if not text.strip():
        raise UsageError(f"{source}: must not be empty")
    urls = [part.strip() for part in text.split(",")]
    if not all(urls):
        raise UsageError(f"{source} {text!r}: an empty URL in the comma-separated list")
    return urls


def parse_env(items: list[str], environ=os.environ) -> dict[str, str]:
    """`-e NAME[=VALUE]` settings, in order (a later one wins)."""
    result: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        shown = f"-e/--env {item!r}"
        if not _ENV_NAME.fullmatch(name):
            raise UsageError(f"{shown}: {name!r} is not a valid environment variable name")
        if name in MANAGED_ENV:
            raise UsageError(f"{shown}: {name} is managed by the remote worker")
        if not sep:
            if name not in environ:
                raise UsageError(f"{shown}: the local environment variable {name} is not set")
            value = environ[name]
        if "\x00" in value:
            raise UsageError(f"{shown}: the value contains a NUL character")
        result[name] = value
    return result


def parse_fetch(items: list[str]) -> list[str]:
    """`--fetch` paths, normalized; relative to the remote working directory."""
    result: list[str] = []
    for item in items:
        try:
            path = normalize_remote_path(item)
        except (TypeError, ValueError) as exc:
            raise UsageError(f"--fetch {item!r}: {exc}") from None
        if path not in result:
            result.append(path)
    return result


def check_out(out: str) -> Path:
    path = Path(out)
    if not out:
        raise UsageError("--out: must not be empty")
    if os.path.lexists(path):
        raise UsageError(f"--out {out}: already exists; choose a new directory (nothing is overwritten)")
    return path


def parse(tool: str, definition: ModuleType, argv: list[str], environ=os.environ) -> Invocation:
    """Parses `argv` (after `kcoral run TOOL`). argparse prints help and usage
    errors itself (SystemExit 0 or 2); our refusals raise UsageError."""
    parser = build_parser(tool, definition)
    split = split_native(argv)
    if split is None:
        if "-h" in argv or "--help" in argv:
            parser.parse_args(["--help"])  # prints the help and exits 0
        raise UsageError("separate the kcoral options from the command's arguments with '--'")
    ours, native = split
    args = parser.parse_args(ours)
    if not native:
        raise UsageError(f"arguments are required after '--': {definition.USAGE}")
    if args.fetch and not getattr(definition, "FETCH", True):
        raise UsageError(f"--fetch is not available for {tool}: {definition.FETCH_REFUSAL}")
    if bool(args.fetch) != (args.out is not None) and not getattr(definition, "OUT_REQUIRED", False):
        raise UsageError("--fetch and --out must be used together (--fetch names what --out receives)")
    for path in args.send:
        if not path:
            raise UsageError("--send: the path must not be empty")
    invocation = Invocation(
        tool=tool,
        urls=resolve_urls(args.url, args.host, args.port, environ),
        timeout=args.timeout,
        output_limit_bytes=args.output_limit_bytes,
        send=list(args.send),
        env=parse_env(args.env, environ),
        fetch=parse_fetch(args.fetch),
        out=check_out(args.out) if args.out is not None else None,
        native=native,
        ca=args.ca,
    )
    if args.ca is not None and not os.path.isfile(args.ca):
        raise UsageError(f"--ca {args.ca}: no such file")
    if invocation.timeout <= 0:
        raise UsageError(f"--timeout {invocation.timeout}: must be positive")
    if invocation.output_limit_bytes <= 0:
        raise UsageError(f"--output-limit-bytes {invocation.output_limit_bytes}: must be positive")
    try:
        definition.check(list(native))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return invocation
