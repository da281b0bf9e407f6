"""`kcoral run TOOL [kcoral options] -- [native arguments]`: remote CLI tools
(spec/benchmark.md §3, spec/protocol.md §8.1).

Every invocation is one ordinary `/execute` program, built on the client: the
standard-library runner (runner.py) and the tool's definition module are
uploaded as Python modules, the `--send` inputs as one tar `bytes` blob, and
the runner runs the tool's command as a subprocess of the worker. A server
needs nothing special for these tools.

  options.py    the options every tool shares, and their refusals (§3.2)
  packing.py    `--send` paths -> one deterministic tar (§3.3)
  runner.py     uploaded as module `tool_runner`: inputs/, outputs/, the subprocess, --fetch (§3.3, §3.4)
  request.py    the program (§3.1) and the outcome -> exit code (§3.5)
  dispatch.py   `kcoral run` itself: help, parsing, executing, replaying output, saving artifacts
  python.py, shell.py, compute_sanitizer.py, ncu.py, run_iket.py
                one definition per tool (§3.6), uploaded as module `definition`:
                client-side rules (`check`) and the remote command (`run`)
"""

#: CLI name -> definition module (below kcoral.tools), in `kcoral run --help` order.
COMMANDS = {
    "python": "python",
    "shell": "shell",
    "compute-sanitizer": "compute_sanitizer",
    "ncu": "ncu",
    "run-iket": "run_iket",
}
