"""`kcoral grade DIR --out FILE.csv`: grade a folder of KernelBench problems on a KCoral server
(issue 42). Each problem becomes one ``AsyncClient.grade`` call (kcoral.grading.kernelbench
builds its three pieces of code); at most --concurrency are in flight. The verdicts go to a CSV
file and a table on stdout (kcoral.grading.report).

Statuses: 0 when every problem was graded, correct or not; 1 when some could not be (no
candidate, a bad SHAPES, a phase that failed, a request that failed); 2 for a bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from kcoral.async_client import AsyncClient
from kcoral.grading.plan import MAX_SEEDS
from kcoral.grading.kernelbench import CANDIDATE_SUFFIX, Problem, ProblemError, find_problems, grade_task
from kcoral.grading.report import summary_table, write_csv
from kcoral.grading.verdict import empty_verdict

DEFAULT_URL = "http://127.0.0.1:8000"

DESCRIPTION = f"""Grade a folder of KernelBench problems on a KCoral server: each candidate's outputs
are compared with the reference's on inputs it never sees, at every shape, and its speed is
measured against the reference's, out of the candidate's reach.

The folder (not searched recursively) holds, for each problem NAME:
  NAME.py      the problem, in KernelBench's format: a `Model` (an nn.Module), `get_inputs()`
               (the forward's arguments) and `get_init_inputs()` (Model's constructor
               arguments), sized by module-level globals assigned literals, e.g. `dim = 4096`
  NAME{CANDIDATE_SUFFIX}  the candidate: a `ModelNew` with Model's constructor arguments and forward
That is the naming rule: a file ending in {CANDIDATE_SUFFIX} is a candidate, never a problem; files
whose names start with `_` are skipped; a NAME.py without its NAME{CANDIDATE_SUFFIX} is listed as an error. Both models are built under the same seed, so that they get the same weights.

A problem may add sizes to grade at, besides its declared ones, as a literal list of dicts
of its size globals (read without running the file):
  batch_size = 16
  dim = 16384
  SHAPES = [{{"batch_size": 8, "dim": 4096}}, {{"batch_size": 64, "dim": 1000}}]

The CSV has one line per problem: problem, correct, speedup, speedup_ci95_low,
speedup_ci95_high, significant, trusted, shapes_used, lease_ms, reasons (joined with "; ")
and error ("phase/kind: message" when the problem could not be graded; then the speedup
cells are empty). The same goes to stdout as a table.

Exit status: 0 when every problem was graded (correct or not), 1 when some could not be,
2 for a bad command line."""

EPILOG = """examples:
  kcoral grade examples/kernelbench --out grades.csv --url http://gpu:8001
  KCORAL_URL=http://gpu:8001 kcoral grade problems/ --out out/grades.csv --seeds 5 --reference-dtype float64

The API key, where the server wants one, comes from $KCORAL_API_KEY."""


def _at_least_one(text: str, most: int | None = None) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1 or (most is not None and value > most):
        bounds = ">= 1" if most is None else f"from 1 to {most}"
        raise argparse.ArgumentTypeError(f"must be an integer {bounds}, got {text!r}")
    return value


def _seeds(text: str) -> int:
    return _at_least_one(text, MAX_SEEDS)


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be seconds in (0, 3600], got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kcoral grade",
        usage="kcoral grade DIR --out FILE.csv [options]",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dir", metavar="DIR", type=Path, help="the folder of problems")
    parser.add_argument("--out", metavar="FILE.csv", type=Path, required=True, help="where the CSV goes")
    parser.add_argument(
        "--url",
        help=f"the server, or a comma-separated list of a cluster's entry nodes (default: $KCORAL_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--ca",
        metavar="PEM",
        help="CA bundle an https server's certificate verifies against (default: $KCORAL_CA_BUNDLE, else the system's)",
    )
    parser.add_argument(
        "--concurrency", metavar="N", type=_at_least_one, default=4, help="problems graded at once (default 4)"
    )
    parser.add_argument(
        "--timeout-seconds",
        metavar="S",
        type=_positive_seconds,
        help="the server-side limit of each of a grade's three programs (default: the server's)",
    )
    parser.add_argument(
        "--seeds",
        metavar="N",
        type=_seeds,
        help=f"input sets drawn per shape, each from its own seed, 1 to {MAX_SEEDS} (default: grade's, 2)",
    )
    parser.add_argument(
        "--reference-dtype",
        choices=("float64",),
        help="run the reference in float64, so that its own rounding does not count against the candidate",
    )
    return parser


def error_verdict(phase: str, kind: str, message: str) -> dict[str, Any]:
    """A verdict for a problem no grade answered, shaped as grade's own when a phase failed; its
    phase is "problem" (not sent) or "request" (grade raised), beside grade's inputs, candidate
    and judge, and its lease_ms is None: unknown, where a request failed midway."""
    verdict = empty_verdict(0, None)
    verdict["error"] = {"phase": phase, "kind": kind, "message": message}
    return verdict


async def grade_problems(
    client: AsyncClient,
    problems: list[Problem],
    concurrency: int,
    extra_cfg: dict[str, Any],
    timeout_seconds: float | None,
) -> list[dict[str, Any]]:
    """One verdict per problem, in the problems' order; a problem that cannot be sent, or whose
    request fails, gets an error verdict and costs no other its own. Closes the client."""
    slots = asyncio.Semaphore(concurrency)
    bar = tqdm(total=len(problems), unit="problem", file=sys.stderr, disable=None, dynamic_ncols=True)
    tally = {"incorrect": 0, "errors": 0}

    async def grade_one(problem: Problem) -> dict[str, Any]:
        if problem.candidate_path is None:
            verdict = error_verdict("problem", "missing_candidate", f"no {problem.name}{CANDIDATE_SUFFIX} beside it")
        else:
            verdict = await send(problem)
        if verdict.get("error"):
            tally["errors"] += 1
        elif not verdict.get("correct"):
            tally["incorrect"] += 1
        bar.set_postfix(tally, refresh=False)
        bar.update(1)
        return verdict

    async def send(problem: Problem) -> dict[str, Any]:
        try:
            candidate, reference, make_inputs, cfg = grade_task(problem)
        except (ProblemError, OSError) as exc:
            return error_verdict("problem", "bad_problem", str(exc))
        async with slots:
            try:
                return await client.grade(
                    candidate, reference, make_inputs, {**cfg, **extra_cfg}, timeout_seconds=timeout_seconds
                )
            except Exception as exc:  # the transport, the server's refusal: this problem's row says which
                return error_verdict("request", type(exc).__name__, str(exc))

    try:
        async with client:
            return list(await asyncio.gather(*(grade_one(problem) for problem in problems)))
    finally:
        bar.close()


def main(argv: list[str]) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if not args.dir.is_dir():
            parser.error(f"argument DIR: {args.dir}: no such directory")
        problems = find_problems(args.dir)
        if not problems:
            parser.error(f"argument DIR: {args.dir} holds no problem (NAME.py beside NAME{CANDIDATE_SUFFIX})")
        if args.out.is_dir():
            parser.error(f"argument --out: {args.out} is a directory")
        try:
            args.out.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            parser.error(f"argument --out: cannot create {args.out.parent}: {exc.strerror}")
        urls = [url.strip() for url in (args.url or os.environ.get("KCORAL_URL") or DEFAULT_URL).split(",")]
        try:
            client = AsyncClient(urls=urls, ca=args.ca)
        except ValueError as exc:  # an empty URL in the list, a CA bundle that cannot be loaded
            parser.error(f"argument --url/--ca: {exc}")
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2

    extra_cfg: dict[str, Any] = {}
    if args.seeds is not None:
        extra_cfg["seeds"] = args.seeds
    if args.reference_dtype is not None:
        extra_cfg["reference_dtype"] = args.reference_dtype
    try:
        verdicts = asyncio.run(grade_problems(client, problems, args.concurrency, extra_cfg, args.timeout_seconds))
    except KeyboardInterrupt:
        print("kcoral grade: interrupted", file=sys.stderr)
        return 130

    rows = [(problem.name, verdict) for problem, verdict in zip(problems, verdicts)]
    write_csv(args.out, rows)
    print(summary_table(rows), end="")
    print(f"kcoral grade: wrote {args.out}", file=sys.stderr)
    return 1 if any(verdict.get("error") for verdict in verdicts) else 0
