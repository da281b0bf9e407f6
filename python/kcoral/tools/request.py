"""The one program of a `kcoral run` invocation (spec/benchmark.md §3.1,
protocol §8.1), and its outcome as an exit status (§3.5).

Wire shape, the reference client's ids included:

  upload       tool_runner  module  (runner.py)
  get_function runner       tool_runner.run
  upload       definition   module  (the tool's definition file)
  get_function tool_run     definition.run
  upload       inputs       bytes   (the --send tar)
  run          run          runner(inputs, tool_run, native args, -e settings, --fetch paths)
  return       outcome      {"returncode": int, "missing": [str]}
  return       artifacts    folder "outputs"      (only with --out)

The outcome is returned before the artifacts, so the exit status survives a
collection that fails.
"""

from __future__ import annotations

import importlib
from importlib import resources
from types import ModuleType
from typing import Any

from kcoral.program import Program
from kcoral.tools import COMMANDS

OUTPUTS = "outputs"
TOOL_ERROR_PREFIX = "ToolError: "  # the runner's refusals, as a worker reports them


def definition(tool: str) -> ModuleType:
    return importlib.import_module(f"kcoral.tools.{COMMANDS[tool]}")


def module_source(module_name: str) -> str:
    """The source file of `kcoral.tools.<module_name>`, uploaded as it is."""
    return resources.files("kcoral.tools").joinpath(f"{module_name}.py").read_text(encoding="utf-8")


def build_program(
    tool: str, inputs_tar: bytes, native: list[str], env: dict[str, str], fetch: list[str], *, out: bool
) -> Program:
    program = Program()
    runner_module = program.upload(id="tool_runner", kind="module", source=module_source("runner"))
    runner = program.get_function(id="runner", module=runner_module, name="run")
    definition_module = program.upload(id="definition", kind="module", source=module_source(COMMANDS[tool]))
    tool_run = program.get_function(id="tool_run", module=definition_module, name="run")
    inputs = program.upload(id="inputs", kind="bytes", value=inputs_tar)
    result = program.run(id="run", fn=runner, args=[inputs, tool_run, list(native), dict(env), list(fetch)])
    program.return_(key="outcome", value=result)
    if out:
        program.return_folder(key="artifacts", path=OUTPUTS)
    return program


class BadOutcome(ValueError):
    """The `outcome` result is not {"returncode": int, "missing": [str]}."""


def parse_outcome(value: Any) -> tuple[int, list[str]]:
    if not isinstance(value, dict):
        raise BadOutcome(f"the outcome is not an object: {value!r}")
    returncode = value.get("returncode")
    missing = value.get("missing", [])
    if not isinstance(returncode, int) or isinstance(returncode, bool):
        raise BadOutcome(f"the outcome's returncode is not an int: {returncode!r}")
    if not isinstance(missing, list) or not all(isinstance(m, str) for m in missing):
        raise BadOutcome(f"the outcome's missing is not a list of strings: {missing!r}")
    return returncode, missing


def exit_status(returncode: int, missing: list[str]) -> int:
    """The remote status passed through (128+N for signal N, as a shell
    reports it); nonzero whenever an artifact is missing."""
    if returncode < 0:
        returncode = 128 - returncode
    if returncode > 255:
        returncode = 1  # not representable as an exit status; still a failure
    if missing and returncode == 0:
        return 1
    return returncode


def failure_message(error: dict[str, Any] | None) -> tuple[str, str | None]:
    """(one-line message, traceback or None) for a FAILED program. The runner's
    own refusals (ToolError) are shown alone; anything else keeps its kind
    and the remote traceback."""
    if not isinstance(error, dict):
        return "the program failed without an error object", None
    message = str(error.get("message", ""))
    if message.startswith(TOOL_ERROR_PREFIX):
        return message[len(TOOL_ERROR_PREFIX) :], None
    kind = error.get("kind")
    traceback = error.get("traceback")
    return f"FAILED ({kind}): {message}", traceback if isinstance(traceback, str) and traceback else None
