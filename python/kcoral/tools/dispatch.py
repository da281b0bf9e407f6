"""`kcoral run`: help, parsing, one request, the remote output replayed, the
artifacts saved, and the exit status (spec/benchmark.md §3.1-3.5).

Statuses: 2 for a command line refused before anything is sent; 1 when the
request fails (transport, HTTP error, FAILED program: "kcoral run TOOL: ...");
otherwise the remote command's own status (128+N for signal N), nonzero if an
artifact is missing.
"""

from __future__ import annotations

import argparse
import sys
from typing import TextIO

from kcoral.tools import COMMANDS, options, packing, request

RUN_EXAMPLES = """\
examples:
  kcoral run python --url http://gpu:8001 -- -c 'import torch; print(torch.cuda.is_available())'
  kcoral run python --send bench.py -e SIZE=4096 -- bench.py
  kcoral run python --url http://n1:8001,http://n2:8001 --send bench.py -- bench.py   # a cluster's entry nodes
  kcoral run shell --send kernel.cu --out build --fetch kernel -- nvcc -o kernel kernel.cu
  kcoral run ncu --send bench.py --out prof -- --set full -- python bench.py
  kcoral run compute-sanitizer --send oob --out san --fetch log.txt -- --error-exitcode 1 --log-file log.txt ./oob

`kcoral run TOOL --help` shows a tool's options. Each run is one ordinary
/execute request: the command runs as a subprocess of a worker, its output is
printed when it ends, and the exit status is the command's.
"""


def top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoral run",
        usage="kcoral run TOOL [options] -- [the tool's own arguments]",
        description="Run a tool on a KCoral server's worker.",
        epilog=RUN_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    tools = parser.add_subparsers(title="tools", metavar="TOOL")
    for name in COMMANDS:
        definition = request.definition(name)
        tools.add_parser(name, help=definition.SUMMARY)
    return parser


def _write(stream: TextIO, text: str) -> None:
    if not text:
        return
    buffer = getattr(stream, "buffer", None)
    if buffer is not None:
        stream.flush()
        buffer.write(text.encode("utf-8", "backslashreplace"))
        buffer.flush()
    else:
        stream.write(text)
        stream.flush()


def _replay(result, limit: int) -> None:
    _write(sys.stdout, result.stdout)
    _write(sys.stderr, result.stderr)
    for name, truncated in (("stdout", result.stdout_truncated), ("stderr", result.stderr_truncated)):
        if truncated:
            print(f"kcoral: the remote {name} was truncated (--output-limit-bytes {limit})", file=sys.stderr)


def _prepare_out(invocation: options.Invocation) -> None:
    parent = invocation.out.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise options.UsageError(f"--out {invocation.out}: cannot create {parent}: {exc.strerror}") from None


def _save(folder, invocation: options.Invocation) -> bool:
    from kcoral.artifacts import ReturnedFolder

    if not isinstance(folder, ReturnedFolder):
        print(f"kcoral run {invocation.tool}: the artifacts are not a folder", file=sys.stderr)
        return False
    try:
        folder.save(invocation.out)
    except (OSError, ValueError) as exc:
        print(f"kcoral run {invocation.tool}: cannot save the artifacts to {invocation.out}: {exc}", file=sys.stderr)
        return False
    print(f"kcoral: saved artifacts to {invocation.out}", file=sys.stderr)
    return True


def execute(invocation: options.Invocation, inputs_tar: bytes) -> int:
    from kcoral.client import Client
    from kcoral.errors import KCoralError, ProtocolError, TransportError

    tool = invocation.tool
    program = request.build_program(
        tool, inputs_tar, invocation.native, invocation.env, invocation.fetch, out=invocation.out is not None
    )
    try:
        client = Client(urls=invocation.urls, ca=invocation.ca)
    except ValueError as exc:  # a CA bundle that cannot be loaded (--ca or $KCORAL_CA_BUNDLE)
        print(f"kcoral run {tool}: {exc}", file=sys.stderr)
        return 2
    try:
        with client:
            result = client.execute(
                program, timeout_seconds=invocation.timeout, output_limit_bytes=invocation.output_limit_bytes
            )
    except (KCoralError, TransportError, ProtocolError) as exc:
        print(f"kcoral run {tool}: {exc}", file=sys.stderr)
        return 1
    _replay(result, invocation.output_limit_bytes)

    status, missing = None, []
    if "outcome" in result.results:
        try:
            returncode, missing = request.parse_outcome(result.results["outcome"])
        except request.BadOutcome as exc:
            print(f"kcoral run {tool}: {exc}", file=sys.stderr)
            return 1
        status = request.exit_status(returncode, missing)
    if invocation.out is not None and "artifacts" in result.results:
        if not _save(result.results["artifacts"], invocation) and not status:
            status = 1
    if missing:
        print(f"kcoral: missing artifacts: {', '.join(missing)}", file=sys.stderr)
    if not result.completed:
        message, traceback = request.failure_message(result.error)
        if traceback:
            _write(sys.stderr, traceback if traceback.endswith("\n") else traceback + "\n")
        print(f"kcoral run {tool}: {message}", file=sys.stderr)
        return 1
    if status is None:
        print(f"kcoral run {tool}: the server returned no outcome", file=sys.stderr)
        return 1
    return status


def run_tool(tool: str, argv: list[str]) -> int:
    definition = request.definition(tool)
    try:
        invocation = options.parse(tool, definition, argv)
        inputs_tar = packing.pack_inputs(invocation.send)
        if invocation.out is not None:
            _prepare_out(invocation)
    except (options.UsageError, packing.PackingError) as exc:
        parser = options.build_parser(tool, definition)
        parser.print_usage(sys.stderr)
        print(f"kcoral run {tool}: error: {exc}", file=sys.stderr)
        return 2
    return execute(invocation, inputs_tar)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        stream = sys.stdout if argv else sys.stderr
        top_parser().print_help(stream)
        return 0 if argv else 2
    tool, rest = argv[0], argv[1:]
    if tool not in COMMANDS:
        top_parser().print_usage(sys.stderr)
        print(f"kcoral run: error: unknown tool {tool!r} (choose from {', '.join(COMMANDS)})", file=sys.stderr)
        return 2
    try:
        return run_tool(tool, rest)
    except SystemExit as exc:  # argparse: --help (0) or its own usage errors (2)
        return exc.code if isinstance(exc.code, int) else 2
    except KeyboardInterrupt:
        print(f"kcoral run {tool}: interrupted", file=sys.stderr)
        return 130
