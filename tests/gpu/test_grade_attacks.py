"""Issue 42's attacks on correctness, one program each: every one first passes a naive grader (the
reference and `torch.testing.assert_close` in the candidate's own process, on one public input at
the declared shape, as graders commonly run it), and the test asserts that; under `grade` each is
then not correct, or not trusted.

The naive grader draws the public input (seed 0), keeps the reference's answer on the host (the
device copy is freed, as `.cpu()` of a temporary frees it) and compares with `equal_nan=True`.
Most graders call the reference first; the grader that zeroes inputs is met by one that calls the
candidate first, on the same inputs."""

import pytest
from test_grade import MAKE_INPUTS, REFERENCE, TIMEOUT_S, candidate, grade

from kcoral import Program
from kcoral.grading import Code

NAIVE = (
    MAKE_INPUTS.source
    + "\n"
    + REFERENCE.source
    + """

def naive(kernel, order):
    inputs = make_inputs(0, None)
    if order == "candidate_first":
        got = kernel(*inputs).cpu()
        expected = reference(*inputs).cpu()
    else:
        expected = reference(*inputs).cpu()
        got = kernel(*inputs).cpu()
    torch.testing.assert_close(got, expected, rtol=1e-2, atol=1e-2, equal_nan=True)
    return "passed"
"""
)

# The public input, as the naive grader draws it: what a candidate that knows the harness answers.
PUBLIC_ANSWER = """
import torch

_answer = None


def kernel(a, b):
    global _answer
    if _answer is None:
        generator = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(1024, 1024, device="cuda", generator=generator)
        y = torch.randn(1024, 1024, device="cuda", generator=generator)
        _answer = x @ y
    return _answer.clone()
"""

HUNT = (
    "    import gc\n"
    "    for obj in gc.get_objects():\n"
    "        if isinstance(obj, torch.Tensor) and tuple(obj.shape) == (a.shape[0], b.shape[1])"
    " and obj is not a and obj is not b:\n"
    "{found}"
    "    return torch.zeros(a.shape[0], b.shape[1], device=a.device){tail}\n"
)

ATTACKS = {
    # The answer sheet copied from the grader's memory.
    "answer_copied_through_gc": (candidate(HUNT.format(found="            return obj.to(a.device).clone()\n", tail="")), "reference_first"),
    # NaN written into the answer sheet, and NaN returned.
    "nan_injected_into_the_answer": (
        candidate(HUNT.format(found="            obj.fill_(float('nan'))\n", tail=".fill_(float('nan'))")),
        "reference_first",
    ),
    # The comparison patched at import: any answer passes.
    "comparison_patched": (
        Code(
            "import torch\n\n"
            "torch.testing.assert_close = lambda *args, **kwargs: None\n"
            "torch.allclose = lambda *args, **kwargs: True\n\n\n"
            "def kernel(a, b):\n    return torch.zeros(a.shape[0], b.shape[1], device=a.device)\n",
            "kernel",
        ),
        "reference_first",
    ),
    # The inputs zeroed, so that the reference called after agrees with a product of zeros.
    "inputs_zeroed_before_the_reference": (candidate("    a.zero_()\n    b.zero_()\n    return a @ b\n"), "candidate_first"),
    # An output never written: the allocator hands back the freed block of the reference's answer.
    "output_in_a_freed_buffer": (candidate("    return torch.empty(a.shape[0], b.shape[1], device=a.device)\n"), "reference_first"),
    # A constant: the answer to the one public input, whatever the inputs.
    "constant_for_the_public_input": (Code(PUBLIC_ANSWER, "kernel"), "reference_first"),
    # Right at the declared size only.
    "hard_coded_for_the_declared_shape": (
        candidate("    out = a @ b\n    if a.shape[0] != 1024:\n        out[0] = 0\n    return out\n"),
        "reference_first",
    ),
}  # fmt: skip


def naive_grade(gpu_client, kernel: Code, order: str):
    """The naive grader's word on `kernel`: "passed", or the error that failed it."""
    program = Program()
    module = program.upload(id="candidate", kind="module", source=kernel.source)  # imported first
    fn = program.get_function(id="kernel", module=module, name=kernel.name)
    grader = program.upload(id="naive", kind="module", source=NAIVE)
    check = program.get_function(id="naive_check", module=grader, name="naive")
    program.return_(key="out", value=program.run(id="check", fn=check, args=[fn, order]))
    result = gpu_client.execute(program, timeout_seconds=TIMEOUT_S)
    return result.results["out"] if result.completed else result.error


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_an_attack_that_passes_a_naive_grader_fails_grade(gpu_client, name):
    kernel, order = ATTACKS[name]
    assert naive_grade(gpu_client, kernel, order) == "passed"
    verdict = grade(gpu_client, kernel)
    print(f"\n[figure] attack {name}: correct={verdict['correct']} trusted={verdict['trusted']} reasons={verdict['reasons'][:2]}")  # fmt: skip
    assert not (verdict["correct"] and verdict["trusted"]), verdict["reasons"]
