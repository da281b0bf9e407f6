"""The three programs of a grade, one per worker process (kcoral/_worker/grading.py). The
reference's module is uploaded and bound before the candidate's, whose import runs its code.
Each program's host-only steps (torch.save and torch.load of the sets, digests) run as cpu_only
functions: off the GPU lease, watched for any CUDA call."""

from __future__ import annotations

from typing import Any

from kcoral.grading.code import Code
from kcoral.program import Program, Register

_GPU_STEPS = ("draw_inputs", "answer", "judge")
_HOST_STEPS = ("pack_inputs", "unpack_sets", "pack_answers", "unpack_for_judge")
_STEPS_SOURCE = f"from kcoral._worker.grading import {', '.join(_GPU_STEPS + _HOST_STEPS)}\n"


class _GradeProgram(Program):
    def __init__(self) -> None:
        super().__init__()
        self._steps = self.upload(id="grade_steps", kind="module", source=_STEPS_SOURCE)

    def bind(self, role: str, code: Code) -> Register:
        module = self.upload(id=f"{role}_module", kind="module", source=code.source)
        return self.get_function(id=role, module=module, name=code.name)

    def step(self, name: str, *args: Any) -> Register:
        fn = self.get_function(id=f"grade_{name}", module=self._steps, name=name, cpu_only=name in _HOST_STEPS)
        return self.run(id=name, fn=fn, args=list(args))


def inputs_program(reference: Code, make_inputs: Code, plan: dict[str, Any]) -> Program:
    program = _GradeProgram()
    bound_reference, bound_make_inputs = program.bind("reference", reference), program.bind("make_inputs", make_inputs)
    drawn = program.step("draw_inputs", bound_reference, bound_make_inputs, plan)
    program.return_(key="inputs", value=program.step("pack_inputs", drawn))
    return program


def candidate_program(candidate: Code, reference: Code, input_sets: bytes, plan: dict[str, Any]) -> Program:
    program = _GradeProgram()
    sets = program.step("unpack_sets", program.upload(id="input_sets", kind="bytes", value=input_sets))
    bound_reference = program.bind("reference", reference)
    answered = program.step("answer", program.bind("candidate", candidate), bound_reference, sets, plan)
    program.return_(key="answer", value=program.step("pack_answers", answered))
    return program


def judge_program(reference: Code, input_sets: bytes, answers: bytes, plan: dict[str, Any]) -> Program:
    program = _GradeProgram()
    sets = program.upload(id="input_sets", kind="bytes", value=input_sets)
    unpacked = program.step("unpack_for_judge", sets, program.upload(id="answers", kind="bytes", value=answers))
    judgement = program.step("judge", program.bind("reference", reference), unpacked, plan)
    program.return_(key="judgement", value=judgement)
    return program
