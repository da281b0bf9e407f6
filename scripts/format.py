"""Formats the tree, or checks that it is formatted: clang-format for C++ and CUDA, ruff for Python.

    python3 scripts/format.py --check    (what `make test` runs: exit 1 when anything is off)
    python3 scripts/format.py            (rewrites the files in place)

The versions are pinned (PINS; `make format-deps` installs them from PyPI), so that a newer
formatter on a fresh machine never fails CI on untouched code. The tools are found through the
Python packages, not PATH, so a distribution's clang-format of another version is never used.
Settings: .clang-format, and [tool.ruff] in pyproject.toml.
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PINS = {"clang-format": "14.0.6", "ruff": "0.8.6"}
CXX_SUFFIXES = (".cc", ".h", ".cu")
PYTHON_TREES = ("python", "tests", "scripts", "bench", "examples")


def tracked(suffixes: tuple[str, ...]) -> list[str]:
    """Files git tracks (or would: untracked but not ignored) with one of `suffixes`."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [path for path in listed if path.endswith(suffixes) and (ROOT / path).is_file()]


def clang_format_binary() -> str:
    try:
        import clang_format
    except ImportError:
        sys.exit(f"format: the clang-format package is missing: pip install clang-format=={PINS['clang-format']}")
    binary = Path(clang_format.__file__).parent / "data" / "bin" / "clang-format"
    version = subprocess.run([str(binary), "--version"], capture_output=True, text=True).stdout
    if PINS["clang-format"] not in version:
        sys.exit(f"format: clang-format {PINS['clang-format']} is pinned, found: {version.strip()}")
    return str(binary)


def ruff(*args: str) -> list[str]:
    command = [sys.executable, "-m", "ruff"]
    version = subprocess.run([*command, "--version"], capture_output=True, text=True).stdout
    if PINS["ruff"] not in version:
        sys.exit(f"format: ruff {PINS['ruff']} is pinned, found: {version.strip() or 'none'} (make format-deps)")
    return [*command, *args]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file is not formatted")
    args = parser.parse_args()
    cxx = tracked(CXX_SUFFIXES)
    trees = [tree for tree in PYTHON_TREES if (ROOT / tree).is_dir()]
    binary = clang_format_binary()
    failed = False
    if args.check:
        steps = [
            [binary, "--dry-run", "--Werror", *cxx],
            ruff("format", "--check", *trees),
            ruff("check", *trees),
        ]
    else:
        steps = [[binary, "-i", *cxx], ruff("check", "--fix", *trees), ruff("format", *trees)]
    for step in steps:
        done = subprocess.run(step, cwd=ROOT)
        failed = failed or done.returncode != 0
    if args.check and failed:
        print("format: run `python3 scripts/format.py` (or `make format`) and commit the result", file=sys.stderr)
    elif args.check:
        print(f"format: {len(cxx)} C++/CUDA files and the Python trees are formatted")
    return 1 if failed else 0


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
