"""`kcoral run shell`: the arguments are the command, exactly as given
(spec/benchmark.md §3.6). Uploaded as module `definition`; standard library only.
"""

SUMMARY = "a command exactly as given (bash -c '...' for pipes)"
USAGE = "COMMAND [args]"
DESCRIPTION = (
    "Run a command on a KCoral worker, exactly as given, in the directory that holds the\n"
    "--send inputs. There is no shell unless you ask for one: use bash -c '...' for pipes,\n"
    "redirections and globs. Sent executables keep their exec bit; run them as ./name."
)
EXAMPLES = """\
  kcoral run shell --url http://gpu:8001 -- nvidia-smi -L
  kcoral run shell --send build.sh -- ./build.sh --arch sm_90a
  kcoral run shell --send kernel.cu --out build --fetch kernel -- nvcc -o kernel kernel.cu
  kcoral run shell -- bash -c 'python -c "print(40 + 2)" | tee answer.txt; ls -l'
"""
FETCH = True
OUT_REQUIRED = False


def check(args):
    if not args[0]:
        raise ValueError("shell: the command (the first argument after '--') must not be empty")


def run(args, tool):
    return {"returncode": tool.execute(list(args)), "missing": []}
