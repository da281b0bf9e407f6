"""A grade as steps: a generator that yields each phase's program and is sent its result, so
Client and AsyncClient drive the same flow with steps.py's drive and adrive, as they drive an
HTTP exchange."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from kcoral.grading import programs
from kcoral.grading.code import Code
from kcoral.grading.plan import make_plan
from kcoral.grading.verdict import failed_verdict, verdict
from kcoral.program import Program
from kcoral.result import ProgramResult

Steps = Generator[Program, ProgramResult, dict[str, Any]]


def grade_steps(candidate: Code, reference: Code, make_inputs: Code, cfg: dict | None = None) -> Steps:
    """Raises ValueError or TypeError, naming the field, before the first program is built."""
    plan = make_plan(cfg, candidate, reference, make_inputs)
    return _steps(candidate, reference, make_inputs, plan)


def _steps(candidate: Code, reference: Code, make_inputs: Code, plan: dict[str, Any]) -> Steps:
    inputs = yield programs.inputs_program(reference, make_inputs, plan)
    if not inputs.completed:
        return failed_verdict("inputs", inputs, [inputs], plan)
    sets = inputs.results["inputs"]["sets"]
    answered = yield programs.candidate_program(candidate, reference, sets, plan)
    if not answered.completed:
        return failed_verdict("candidate", answered, [inputs, answered], plan)
    judged = yield programs.judge_program(reference, sets, answered.results["answer"]["answers"], plan)
    if not judged.completed:
        return failed_verdict("judge", judged, [inputs, answered, judged], plan)
    return verdict(inputs, answered, judged, plan)
