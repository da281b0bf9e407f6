"""Many problems' verdicts (``grade``'s dicts) as a CSV file and as a table for a terminal.

``rows`` is a list of (problem name, verdict). A verdict whose ``error`` is set (a phase
failed: the candidate raised, did not compile, the request failed) shows it as
``phase/kind: message``: in the CSV's ``error`` column, and in the table's reasons column, alone.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["CSV_COLUMNS", "error_text", "summary_table", "write_csv"]

Rows = Sequence[tuple[str, dict[str, Any]]]

CSV_COLUMNS = (
    "problem",
    "correct",
    "speedup",
    "speedup_ci95_low",
    "speedup_ci95_high",
    "significant",
    "trusted",
    "shapes_used",
    "lease_ms",
    "reasons",
    "error",
)
TABLE_COLUMNS = ("problem", "correct", "speedup", "ci95", "significant", "trusted", "shapes_used", "lease_ms")

# A table row stays one line: a long message (a traceback) is in the CSV whole.
TABLE_MESSAGE_CHARS = 160


def error_text(verdict: dict[str, Any]) -> str:
    """``phase/kind: message`` of an error verdict, else ""."""
    error = verdict.get("error")
    if not error:
        return ""
    return f"{error.get('phase')}/{error.get('kind')}: {error.get('message')}"


def write_csv(path: str | Path, rows: Rows) -> None:
    """One line per problem, CSV_COLUMNS; a number that is None (no speedup for an error
    verdict) is an empty cell, reasons are joined with "; "."""
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(CSV_COLUMNS)
        for name, verdict in rows:
            writer.writerow(
                [
                    name,
                    _csv_bool(verdict.get("correct")),
                    _csv_number(verdict.get("speedup")),
                    _csv_number(verdict.get("speedup_ci95_low")),
                    _csv_number(verdict.get("speedup_ci95_high")),
                    _csv_bool(verdict.get("significant")),
                    _csv_bool(verdict.get("trusted")),
                    _csv_number(verdict.get("shapes_used")),
                    _csv_number(verdict.get("lease_ms")),
                    "; ".join(verdict.get("reasons") or ()),
                    error_text(verdict),
                ]
            )


def summary_table(rows: Rows) -> str:
    """Aligned plain text: a header, one line per problem (reasons last, unpadded) and a count."""
    lines = [list(TABLE_COLUMNS) + ["reasons"]]
    for name, verdict in rows:
        lines.append([name, *_table_cells(verdict)])
    widths = [max(len(line[column]) for line in lines) for column in range(len(TABLE_COLUMNS))]
    text = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)) + "  " + line[-1] for line in lines]
    return "\n".join(line.rstrip() for line in text) + "\n" + _counts(rows) + "\n"


def _table_cells(verdict: dict[str, Any]) -> list[str]:
    low, high = verdict.get("speedup_ci95_low"), verdict.get("speedup_ci95_high")
    # grade's reason for a failed phase repeats its error: the table shows the error alone.
    reasons = ["error " + error_text(verdict)] if verdict.get("error") else list(verdict.get("reasons") or ())
    return [
        "error" if verdict.get("error") else _yes_no(verdict.get("correct")),
        _fixed(verdict.get("speedup"), 2),
        "-" if low is None or high is None else f"{low:.2f}-{high:.2f}",
        _yes_no(verdict.get("significant")),
        _yes_no(verdict.get("trusted")),
        "-" if verdict.get("shapes_used") is None else str(verdict["shapes_used"]),
        _fixed(verdict.get("lease_ms"), 0),
        _one_line("; ".join(reasons)),
    ]


def _counts(rows: Rows) -> str:
    errors = sum(1 for _, verdict in rows if verdict.get("error"))
    correct = sum(1 for _, verdict in rows if not verdict.get("error") and verdict.get("correct"))
    return f"{len(rows)} problems: {correct} correct, {len(rows) - correct - errors} incorrect, {errors} not graded"


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= TABLE_MESSAGE_CHARS else flat[: TABLE_MESSAGE_CHARS - 3] + "..."


def _yes_no(value: Any) -> str:
    return "-" if value is None else ("yes" if value else "no")


def _fixed(value: Any, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _csv_bool(value: Any) -> str:
    return "" if value is None else ("true" if value else "false")


def _csv_number(value: Any) -> str:
    return "" if value is None else str(value)
