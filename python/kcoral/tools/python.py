"""`kcoral run python`: the worker's own interpreter, `[sys.executable, *args]`
(spec/benchmark.md §3.6).

Uploaded as module `definition`, so standard library only. `check` runs on
the client, `run` in the worker.
"""

import sys

SUMMARY = "Python with the worker's own interpreter: a script, -c or -m"
USAGE = "(SCRIPT | -c COMMAND | -m MODULE) [args]"
DESCRIPTION = (
    "Run Python on a KCoral worker with the worker's own interpreter (the one that has\n"
    "torch, tvm_ffi and kcoral.builtins). The arguments are Python's; a script, -c or -m\n"
    "is required, and there is no interactive mode or stdin."
)
EXAMPLES = """\
  kcoral run python --url http://gpu:8001 -- -c 'import torch; print(torch.cuda.get_device_name())'
  kcoral run python --send bench.py -- bench.py --size 4096
  kcoral run python --send pkg -e PYTHONPATH=. -- -m pkg.main
  kcoral run python --send check.py --out results --fetch report.json -- check.py
"""
FETCH = True
OUT_REQUIRED = False

# Options that take a value, attached (-Wignore) or as the next argument.
_WITH_VALUE = "WX"
_LONG_WITH_VALUE = ("--check-hash-based-pycs",)


def check(args):
    """Refuses what cannot run remotely: no script, -c or -m (stdin), or -i."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-":
            break  # the program would come from stdin
        if arg == "--":
            if i + 1 < len(args) and args[i + 1] != "-":
                return  # the script follows
            break
        if not arg.startswith("-"):
            return  # the script; what follows is its own arguments
        if arg.startswith("--"):
            i += 2 if arg in _LONG_WITH_VALUE else 1
            continue
        for j in range(1, len(arg)):
            flag = arg[j]
            if flag == "i":
                raise ValueError(f"python {arg}: interactive Python is not supported remotely")
            if flag in "cm":
                return  # the rest of the arguments belong to the command or module
            if flag in _WITH_VALUE:
                if j == len(arg) - 1:
                    i += 1  # the value is the next argument
                break
        i += 1
    raise ValueError("python: a script, -c COMMAND or -m MODULE is required (there is no stdin remotely)")


def run(args, tool):
    return {"returncode": tool.execute([sys.executable, *args]), "missing": []}
