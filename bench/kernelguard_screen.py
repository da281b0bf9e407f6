#!/usr/bin/env python3
"""Screen our honest corpus and our cheats with kernelguard, a rule-based static detector of
GPU-kernel competition hacks (PyPI `kernelguard`, measured at 0.3.2; issue 40, optional item 6).

Every honest pattern of tests/gpu/honest_patterns.py (PATTERNS) and every attack program of
tests/gpu/cheats.py (CLASS_CASES, PYTHON_PATCHES and the older module-level cheats) is given to
kernelguard's `analyze_code` as one module source. The honest twins that cheats.py times beside its
cheats (HONEST, HONEST_MATMUL, ...) are screened too and shown, but are not part of the corpus
totals. The script prints one row per source (group, name, class, kernelguard's classification and
the rule ids it matched), then totals at three thresholds of "flagged":

  hacked      kernelguard's own verdict: classification "hacked" (should_filter, an auto-filter
              rule such as OBFUSCATED_EXEC or OUTPUT_REPLAY_CACHE matched). The headline.
  suspicious  "suspicious" or "hacked".
  any         any rule matched at all (anything but "valid", telemetry-only rules included).

For each: honest patterns flagged (count, %), cheats flagged (count, %), precision (flagged cheats /
all flagged, honest corpus + cheats) and recall (flagged cheats / all cheats), and the issue's
decision rule: adopt kernelguard for `integrity.conditions` only if it flags under 5% of the honest
patterns. Nothing is adopted here; the script only measures. CPU only: nothing is run, sources are
only parsed.

kernelguard is NOT one of our dependencies. It runs in a virtual environment of its own, in a
child process (this file, run there with --worker); this process only imports the corpus (which
imports `kcoral`, found under ./python when it is not installed). Set it up once with

  python3 -m venv /tmp/kgvenv && /tmp/kgvenv/bin/pip install kernelguard==0.3.2

and point elsewhere with --kernelguard-python PATH or $KERNELGUARD_PYTHON.

Profiles: kernelguard's default profile looks for entry points named `custom_kernel` (GPU MODE's
name); ours is `kernel`, so this script uses the built-in `sol-execbench` profile by default
(entry points custom_kernel, kernel, forward, run; every detector on). --compare-profiles adds one
totals block per built-in profile (default, strict, generic, sol-execbench).
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_PYTHON = "/tmp/kgvenv/bin/python"
MEASURED_VERSION = "0.3.2"
BUILTIN_PROFILES = ("default", "strict", "generic", "sol-execbench")
THRESHOLDS = ("hacked", "suspicious", "any")
ADOPT_BELOW = 0.05  # the rule: adopt only if under 5% of honest patterns are flagged

# The cheats written before CLASS_CASES (tests/gpu/test_integrity.py), with their section of cheats.py.
LEGACY_CHEATS = {
    "CACHED_ONCE": "legacy: result caching",
    "CACHED_BY_POINTER": "legacy: result caching",
    "STORAGE_SWAP": "legacy: result caching",
    "STORAGE_SWAP_AFTER_ONE": "legacy: result caching",
    "WRITES_ON_FIRST_CALL_ONLY": "legacy: lazy output",
    "RETURNS_CACHED_TENSOR": "legacy: lazy output",
    "GRAPH_REPLAYS_PRECOMPUTED_COPY": "legacy: lazy output",
    "WRONG_WITH_PATCHED_CHECKER": "legacy: checker tampering",
    "PERSISTING_L2": "legacy: persisting L2",
    "HELPER_PROCESS": "legacy: work in another proc.",
    "HIDDEN_API_RECORDS": "legacy: hidden API records",
    "SABOTAGED_BASELINE": "legacy: baseline sabotage",
    "SET_CLOCKS": "legacy: clocks",
}
# Module-level strings of cheats.py that are no submission of their own (shared helpers, uploaded
# beside a cheat, or a driver script).
HELPERS = {"_LOADED", "CLASS_OPS", "_NATIVE", "_REPLAY", "_SMOKE_CASE"}


# --- The worker: runs under kernelguard's own interpreter ------------------------------------


def worker() -> None:
    """Read {"profile", "overrides", "sources": [source, ...]} on stdin, write kernelguard's
    verdict of each on stdout as JSON."""
    import importlib.metadata

    import kernelguard

    request = json.load(sys.stdin)
    answer = {"version": importlib.metadata.version("kernelguard"), "profiles": {}}
    for profile in request["profiles"]:
        kernelguard.configure_runtime(profile=profile, overrides=request["overrides"] or None)
        verdicts = []
        for source in request["sources"]:
            result = kernelguard.analyze_code(source, compute_structural_hash=False)
            verdicts.append(
                {
                    "classification": result["classification"],
                    "should_filter": result["should_filter"],
                    "rules": [[m["pattern"], m["severity"]] for m in result["matched_patterns"]],
                }
            )
        answer["profiles"][profile] = verdicts
    json.dump(answer, sys.stdout)


# --- The corpus -------------------------------------------------------------------------------


def load_sources() -> tuple[list[dict], list[str]]:
    """Every source to screen: {"group": honest|cheat|twin, "name", "cls", "source"}, and notes on
    module-level strings of cheats.py that are neither screened nor known helpers."""
    try:
        import kcoral  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "tests", "gpu"))
    import cheats
    import honest_patterns

    rows = [
        {"group": "honest", "name": p.name, "cls": "honest (" + p.kind + ")", "source": p.source}
        for p in honest_patterns.PATTERNS
    ]
    cheat_rows = []
    for name, case in cheats.CLASS_CASES.items():
        cheat_rows.append({"group": "cheat", "name": name, "cls": case["cls"], "source": case["source"]})
    for name, source in cheats.PYTHON_PATCHES.items():
        cheat_rows.append({"group": "cheat", "name": name, "cls": "legacy: python patch", "source": source})
    for constant, cls in LEGACY_CHEATS.items():
        cheat_rows.append({"group": "cheat", "name": constant.lower(), "cls": cls, "source": getattr(cheats, constant)})
    seen = set()
    for row in cheat_rows:  # a source listed twice counts once
        if row["source"] not in seen:
            seen.add(row["source"])
            rows.append(row)

    twins = {"HONEST": cheats.HONEST, "HONEST_ON_A_STREAM": cheats.HONEST_ON_A_STREAM}
    for case in cheats.CLASS_CASES.values():
        for constant, value in vars(cheats).items():
            if value is case["honest"] and constant.isupper():
                twins.setdefault(constant, value)
    for constant, source in twins.items():
        rows.append({"group": "twin", "name": constant.lower(), "cls": "honest twin", "source": source})

    screened = {row["source"] for row in rows}
    notes = [
        f"cheats.{constant} is neither screened nor a known helper: classify it in {os.path.basename(__file__)}"
        for constant, value in vars(cheats).items()
        if isinstance(value, str)
        and constant.lstrip("_").isupper()
        and constant not in HELPERS
        and value not in screened
    ]
    return rows, notes


# --- Screening and totals ---------------------------------------------------------------------


def find_python(requested: str | None) -> str:
    python = requested or os.environ.get("KERNELGUARD_PYTHON") or DEFAULT_PYTHON
    if not os.path.exists(python):
        sys.exit(
            f"kernelguard's interpreter {python} does not exist. Set it up with\n"
            f"  python3 -m venv /tmp/kgvenv && /tmp/kgvenv/bin/pip install kernelguard=={MEASURED_VERSION}\n"
            "or pass --kernelguard-python PATH (or set $KERNELGUARD_PYTHON)."
        )
    return python


def screen(python: str, sources: list[str], profiles: list[str], overrides: list[str]) -> dict:
    request = json.dumps({"profiles": profiles, "overrides": overrides, "sources": sources})
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run(
        [python, os.path.abspath(__file__), "--worker"], input=request, capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        sys.exit(f"kernelguard's worker failed (rc {done.returncode}) under {python}:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def flagged(verdict: dict, threshold: str) -> bool:
    if threshold == "hacked":
        return verdict["classification"] == "hacked"
    if threshold == "suspicious":
        return verdict["classification"] in ("hacked", "suspicious")
    return verdict["classification"] != "valid"


def pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:5.1f}%" if whole else "  n/a"


def totals(rows: list[dict], verdicts: list[dict], title: str) -> list[str]:
    groups = {g: [v for r, v in zip(rows, verdicts) if r["group"] == g] for g in ("honest", "cheat", "twin")}
    n_honest, n_cheat, n_twin = (len(groups[g]) for g in ("honest", "cheat", "twin"))
    lines = [title]
    lines.append(
        f"  {'flagged =':22} {'honest flagged':>16} {'cheats flagged':>16} {'precision':>9} {'recall':>7}"
        f" {'twins':>5}  decision (< {ADOPT_BELOW:.0%} of honest)"
    )
    for threshold in THRESHOLDS:
        honest = sum(flagged(v, threshold) for v in groups["honest"])
        cheat = sum(flagged(v, threshold) for v in groups["cheat"])
        twin = sum(flagged(v, threshold) for v in groups["twin"])
        precision = pct(cheat, cheat + honest) if cheat + honest else "  n/a"
        decision = "adopt" if honest < ADOPT_BELOW * n_honest else "do not adopt"
        label = {
            "hacked": "hacked (kg's verdict)",
            "suspicious": "suspicious or hacked",
            "any": "any rule matched",
        }[threshold]
        lines.append(
            f"  {label:22} {f'{honest}/{n_honest} ({pct(honest, n_honest).strip()})':>16}"
            f" {f'{cheat}/{n_cheat} ({pct(cheat, n_cheat).strip()})':>16} {precision.strip():>9}"
            f" {pct(cheat, n_cheat).strip():>7} {f'{twin}/{n_twin}':>5}  {decision}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter, prog="bench/kernelguard_screen.py"
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--kernelguard-python",
        metavar="PATH",
        help=f"the interpreter that has kernelguard installed (default: $KERNELGUARD_PYTHON or {DEFAULT_PYTHON})",
    )
    parser.add_argument(
        "--profile",
        default="sol-execbench",
        choices=BUILTIN_PROFILES,
        help="kernelguard's built-in profile for the table and the headline totals (default: %(default)s,"
        " the built-in one whose entry points include `kernel`)",
    )
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a kernelguard config override (its --set), e.g. 'entrypoints.names=[\"kernel\"]'; repeatable",
    )
    parser.add_argument(
        "--compare-profiles", action="store_true", help="also print the totals under every built-in profile"
    )
    parser.add_argument("--only-flagged", action="store_true", help="in the table, only rows with some rule matched")
    parser.add_argument("--json", metavar="PATH", help="also write every row and verdict as JSON to PATH")
    args = parser.parse_args()
    if args.worker:
        worker()
        return

    rows, notes = load_sources()
    python = find_python(args.kernelguard_python)
    profiles = [args.profile] + ([p for p in BUILTIN_PROFILES if p != args.profile] if args.compare_profiles else [])
    answer = screen(python, [row["source"] for row in rows], profiles, args.overrides)
    verdicts = answer["profiles"][args.profile]

    print(
        f"kernelguard {answer['version']} ({python}), profile {args.profile}"
        + (f", --set {args.overrides}" if args.overrides else "")
    )
    if answer["version"] != MEASURED_VERSION:
        print(f"note: measured with kernelguard {MEASURED_VERSION}; this is {answer['version']}")
    print()
    header = f"{'group':7} {'name':44} {'class':31} {'verdict':15} rules (severity)"
    print(header)
    print("-" * len(header))
    for row, verdict in zip(rows, verdicts):
        if args.only_flagged and verdict["classification"] == "valid":
            continue
        rules = ", ".join(f"{rule}({severity})" for rule, severity in verdict["rules"]) or "-"
        print(f"{row['group']:7} {row['name']:44} {row['cls']:31} {verdict['classification']:15} {rules}")
    print()
    for line in totals(
        rows, verdicts, f"Totals, profile {args.profile} (twins: cheats.py's honest twins, not in the precision):"
    ):
        print(line)
    for profile in profiles[1:]:
        print()
        for line in totals(rows, answer["profiles"][profile], f"Totals, profile {profile}:"):
            print(line)
    for note in notes:
        print("note: " + note)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(
                {
                    "kernelguard": answer["version"],
                    "rows": [
                        {key: row[key] for key in ("group", "name", "cls")}
                        | {"verdicts": {p: answer["profiles"][p][i] for p in profiles}}
                        for i, row in enumerate(rows)
                    ],
                },
                out,
                indent=1,
            )


if __name__ == "__main__":
    main()
