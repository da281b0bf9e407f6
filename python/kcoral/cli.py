"""The `kcoral` command.

kcoral server [flags]   start a KCoral server (the C++ kcoral-server; see --help)
kcoral run TOOL ...     run python, shell, ncu, compute-sanitizer or run-iket on a server's worker
kcoral keys new TENANT  make an API key and its line for --auth-keys
kcoral cluster up|down  a cluster on this machine, for a trial
kcoral mcp [--http H:P] KCoral's tools for agents over the Model Context Protocol
kcoral grade DIR        grade a folder of KernelBench problems, verdicts to a CSV
kcoral version          print the package version
"""

import os
import shutil
import sys
from pathlib import Path

USAGE = """usage: kcoral <command> [options]

commands:
  server    start a KCoral server, for example
              kcoral server --device cpu --num-workers 8 --host 0.0.0.0 --port 8000
            `kcoral server --help` lists every flag.
  run       run a tool on a server's worker: kcoral run TOOL [options] -- [the tool's arguments]
            tools: python, shell, compute-sanitizer, ncu, run-iket; for example
              kcoral run python --url http://gpu:8001 --send bench.py -- bench.py
              kcoral run ncu --url http://gpu:8001 --send bench.py --out prof -- --set full -- python bench.py
            `kcoral run --help` lists the tools, `kcoral run TOOL --help` shows a tool's options.
  keys      make an API key for `kcoral server --auth-keys FILE`:
              kcoral keys new alice [--role operator]
  cluster   a KCoral cluster on this machine, for a trial (3 NATS brokers, 2 CPU nodes):
              kcoral cluster up      starts it, sends a request through it, prints its URLs
              kcoral cluster status  shows it
              kcoral cluster down    stops it and removes its folder
            `kcoral cluster --help` lists the options.
  mcp       serve KCoral's tools (target, compile, evaluate, run, usage) to an agent over MCP,
            on stdio or streamable HTTP; the key comes from $KCORAL_API_KEY, for example
              kcoral mcp --url http://gpu:8001
              kcoral mcp --url http://gpu:8001 --http 127.0.0.1:8765
            `kcoral mcp --help` lists every flag; docs/mcp.md has an agent's configuration.
  grade     grade a folder of KernelBench problems (NAME.py, and its candidate NAME_new.py
            defining ModelNew) on a server, verdicts to a CSV and a table, for example
              kcoral grade examples/kernelbench --out grades.csv --url http://gpu:8001
            `kcoral grade --help` has the file format, SHAPES and the CSV's columns.
  version   print the package version
"""


def server_binary() -> str:
    """kcoral-server: $KCORAL_SERVER_BIN, the installed package, or a dev build."""
    explicit = os.environ.get("KCORAL_SERVER_BIN")
    if explicit:
        return explicit
    package = Path(__file__).resolve().parent
    candidate = package / "bin" / "kcoral-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("kcoral-server")
    if found:
        return found
    raise SystemExit("kcoral: cannot find kcoral-server; run `make build` or set KCORAL_SERVER_BIN")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    if command == "server":
        binary = server_binary()
        env = dict(os.environ)
        # Workers run in this interpreter, where kcoral and its dependencies live.
        env.setdefault("KCORAL_PYTHON", sys.executable)
        os.execve(binary, [binary, *rest], env)
    if command == "run":
        from kcoral.tools.dispatch import main as run_main

        return run_main(rest)
    if command == "keys":
        from kcoral.keys import main as keys_main

        return keys_main(rest)
    if command == "cluster":
        from kcoral.tools.local_cluster import main as cluster_main

        return cluster_main(rest)
    if command == "mcp":
        from kcoral.mcp_tools.command import main as mcp_main

        return mcp_main(rest)
    if command == "grade":
        from kcoral.tools.grade import main as grade_main

        return grade_main(rest)
    if command == "version":
        from kcoral import __version__

        print(__version__)
        return 0
    print(f"kcoral: unknown command {command!r}\n\n{USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
