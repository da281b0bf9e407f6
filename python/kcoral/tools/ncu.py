"""`kcoral run ncu`: Nsight Compute with a managed report (spec/benchmark.md §3.6).

The remote command is `ncu --config-file 0 --export <outputs>/capture.ncu-rep
<profiler options> <application>`; the report comes back as
`OUT/capture.ncu-rep`. Uploaded as module `definition`; standard library only.
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


def _refused(option):
    """True for a refused option, a prefix of one (ncu accepts unambiguous
    prefixes), or a refused short option with its value attached."""
    if option.startswith("--"):
        name = option.split("=", 1)[0]
        return len(name) > 2 and any(refused.startswith(name) for refused in _REFUSED_LONG)
    return any(option == short or option.startswith(short) for short in _REFUSED_SHORT)


def split(args):
    """(profiler options, application) around the second '--'."""
    if "--" not in args:
        raise ValueError(
            "ncu: separate the profiler options from the application with a second '--' "
            "(kcoral run ncu --out DIR -- [profiler options] -- APPLICATION [args])"
        )
    index = args.index("--")
    return args[:index], args[index + 1 :]


def check(args):
    options, application = split(args)
    if not application:
        raise ValueError("ncu: the application is missing after the second '--'")
    for option in options:
        if option.startswith("-") and _refused(option):
            raise ValueError(
                f"ncu {option}: kcoral manages the report's path and mode "
                "(it comes back as OUT/capture.ncu-rep); remove this option"
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
