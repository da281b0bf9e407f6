"""The three programs of a grade, one per worker process (kcoral/_worker/grading.py). The
reference's module is uploaded and bound before the candidate's, whose import runs its code."""

from __future__ import annotations

from typing import Any

from kcoral.grading.code import Code
from kcoral.program import Program, Register

_PHASES = "from kcoral._worker.grading import answer, draw_inputs, judge\n"


def _bind(program: Program, role: str, code: Code) -> Register:
    module = program.upload(id=f"{role}_module", kind="module", source=code.source)
    return program.get_function(id=role, module=module, name=code.name)


def _phase(program: Program, name: str) -> Register:
    phases = program.upload(id="grade_phases", kind="module", source=_PHASES)
    return program.get_function(id=f"grade_{name}", module=phases, name=name)


def inputs_program(reference: Code, make_inputs: Code, plan: dict[str, Any]) -> Program:
    program = Program()
    phase = _phase(program, "draw_inputs")
    args = [_bind(program, "reference", reference), _bind(program, "make_inputs", make_inputs), plan]
    program.return_(key="inputs", value=program.run(id="inputs", fn=phase, args=args))
    return program


def candidate_program(candidate: Code, reference: Code, input_sets: bytes, plan: dict[str, Any]) -> Program:
    program = Program()
    phase = _phase(program, "answer")
    bound_reference = _bind(program, "reference", reference)
    sets = program.upload(id="input_sets", kind="bytes", value=input_sets)
    args = [_bind(program, "candidate", candidate), bound_reference, sets, plan]
    program.return_(key="answer", value=program.run(id="answer", fn=phase, args=args))
    return program


def judge_program(reference: Code, input_sets: bytes, answers: bytes, plan: dict[str, Any]) -> Program:
    program = Program()
    phase = _phase(program, "judge")
    args = [
        _bind(program, "reference", reference),
        program.upload(id="input_sets", kind="bytes", value=input_sets),
        program.upload(id="answers", kind="bytes", value=answers),
        plan,
    ]
    program.return_(key="judgement", value=program.run(id="judgement", fn=phase, args=args))
    return program
