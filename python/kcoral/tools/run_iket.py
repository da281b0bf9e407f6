"""`kcoral run run-iket`: `["run-iket", "--output-dir", <outputs>, *args]`; the
whole output directory comes back as OUT (spec/benchmark.md §3.6). Uploaded
as module `definition`: `run` uses the standard library only; `check` runs on
the client, with kcoral.tools.options.
"""

import os

SUMMARY = "run-iket profile; its output directory comes back as OUT"
USAGE = "profile [profiler options] -- APPLICATION [args]"
DESCRIPTION = (
    "Run run-iket on a KCoral GPU worker. Its `profile` subcommand is required, and a second\n"
    "'--' separates its options from the application. kcoral chooses the output directory:\n"
    "everything run-iket writes there (JSON traces, intermediates) comes back as OUT\n"
    "(--out is required), so --output-dir, --working-dir and -o (or any prefix) are refused."
)
EXAMPLES = """\
  kcoral run run-iket --send bench.py --out traces -- profile -- python bench.py
"""
FETCH = False
FETCH_REFUSAL = "the whole output directory comes back as OUT"
OUT_REQUIRED = True

NO_OUTPUT = "outputs/ (run-iket wrote no file)"
_REFUSED_LONG = ("--output-dir", "--working-dir")
_REFUSED_SHORT = ("-o",)


def check(args):
    # On the client only, where kcoral is installed; run() needs the standard library alone.
    from kcoral.tools.options import refuse_managed_options, split_application

    options, application = split_application("run-iket", args, "profile [options] -- APPLICATION [args]")
    if "profile" not in options:
        raise ValueError("run-iket: the `profile` subcommand is required before the second '--'")
    if not application:
        raise ValueError("run-iket: the application is missing after the second '--'")
    refuse_managed_options("run-iket", options, _REFUSED_LONG, _REFUSED_SHORT, "the output directory")


def _has_files(directory):
    for _root, _dirs, files in os.walk(directory):
        if files:
            return True
    return False


def run(args, tool):
    returncode = tool.execute(["run-iket", "--output-dir", tool.outputs, *args])
    return {"returncode": returncode, "missing": [] if _has_files(tool.outputs) else [NO_OUTPUT]}
