"""`kcoral run compute-sanitizer`: `["compute-sanitizer", *args]`, native exit
behaviour kept (spec/benchmark.md §3.6). Uploaded as module `definition`;
standard library only.
"""

SUMMARY = "NVIDIA compute-sanitizer on an application"
USAGE = "[sanitizer options] APPLICATION [args]"
DESCRIPTION = (
    "Run NVIDIA compute-sanitizer on a KCoral GPU worker. Its own exit behaviour is kept:\n"
    "pass --error-exitcode 1 so that findings fail the command, and return its log with\n"
    "--log-file X --fetch X --out DIR."
)
EXAMPLES = """\
  kcoral run compute-sanitizer --send oob -- --error-exitcode 1 ./oob
  kcoral run compute-sanitizer --send app.py --out report --fetch log.txt -- \\
      --tool memcheck --error-exitcode 1 --log-file log.txt python app.py
"""
FETCH = True
OUT_REQUIRED = False


def check(args):
    pass


def run(args, tool):
    tool.append_cuda_bin()
    return {"returncode": tool.execute(["compute-sanitizer", *args]), "missing": []}
