"""`kcoral run ncu`: Nsight Compute with a managed report (spec/benchmark.md §3.6).

The remote command is `ncu --config-file 0 --export <outputs>/capture.ncu-rep
<profiler options> <application>`; the report comes back as
`OUT/capture.ncu-rep`. Uploaded as module `definition`: `run` uses the
standard library only; `check` runs on the client, with kcoral.tools.options.
"""

import os

SUMMARY = "Nsight Compute; the report comes back as OUT/capture.ncu-rep"
USAGE = "[profiler options] -- APPLICATION [args]"
DESCRIPTION = (
    "Profile an application with Nsight Compute (ncu) on a KCoral GPU worker. A second\n"
    "'--' separates ncu's options from the application. The report comes back as\n"
    "OUT/capture.ncu-rep (--out is required); read it with `ncu --import`.\n"
    "kcoral chooses the report's path and mode, so --export, --import, --mode, --config-file,\n"
    "--config-file-path, -o and -i (or any prefix of them) are refused. NCU_PROFILE=1 is set\n"
    "unless -e sets it."
)
EXAMPLES = """\
  kcoral run ncu --send bench.py --out prof -- --set full -k regex:gemm -- python bench.py
  kcoral run ncu --send app --out prof -- --launch-count 1 -- ./app
  ncu --import prof/capture.ncu-rep --page details
"""
FETCH = False
FETCH_REFUSAL = "the report always comes back as OUT/capture.ncu-rep"
OUT_REQUIRED = True

REPORT = "capture.ncu-rep"
_REFUSED_LONG = ("--export", "--import", "--mode", "--config-file", "--config-file-path")
_REFUSED_SHORT = ("-o", "-i")


def split(args):
    """(profiler options, application) around the second '--', which check()
    has made sure of."""
    index = args.index("--")
    return args[:index], args[index + 1 :]


def check(args):
    # On the client only, where kcoral is installed; run() needs the standard library alone.
    from kcoral.tools.options import refuse_managed_options, split_application

    options, application = split_application("ncu", args, USAGE)
    if not application:
        raise ValueError("ncu: the application is missing after the second '--'")
    refuse_managed_options(
        "ncu",
        options,
        _REFUSED_LONG,
        _REFUSED_SHORT,
        "the report's path and mode (it comes back as OUT/capture.ncu-rep)",
    )


def run(args, tool):
    options, application = split(list(args))
    if "NCU_PROFILE" not in tool.overrides:
        tool.env["NCU_PROFILE"] = "1"  # keeps TIRx's Proton timer out of the way
    tool.append_cuda_bin()
    report = os.path.join(tool.outputs, REPORT)
    command = ["ncu", "--config-file", "0", "--export", report, *options, *application]
    returncode = tool.execute(command)
    return {"returncode": returncode, "missing": [] if os.path.isfile(report) else [REPORT]}
