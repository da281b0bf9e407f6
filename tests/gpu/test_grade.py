"""Issue 42 on a GPU: `grade` judges a candidate out of its reach. Three programs, three workers:
the input sets are drawn from seeds the candidate never sees, the reference's answers exist only
in the judge's process, and the candidate's outputs and inputs travel there as bytes. Honest code
is correct and trusted; the public attacks on correctness each fail, for the reason the verdict
names."""

import csv
import os
import subprocess
import sys
from pathlib import Path

from kcoral.grading import Code

REPO = Path(__file__).resolve().parents[2]

TIMEOUT_S = 180
SHAPES = [{"n": 512}, {"n": 768}, {"n": 1536}]

MAKE_INPUTS = Code(
    """
import torch

def make_inputs(seed, shape):
    n = (shape or {"n": 1024})["n"]
    generator = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(n, n, device="cuda", generator=generator)
    b = torch.randn(n, n, device="cuda", generator=generator)
    return a, b
""",
    "make_inputs",
)
REFERENCE = Code("def reference(a, b):\n    return a @ b\n", "reference")


def candidate(body: str) -> Code:
    return Code("import torch\n\n\ndef kernel(a, b):\n" + body, "kernel")


HONEST = candidate("    return torch.mm(a, b)\n")


def grade(gpu_client, kernel: Code, **cfg) -> dict:
    verdict = gpu_client.grade(kernel, REFERENCE, MAKE_INPUTS, {"shapes": SHAPES, **cfg}, timeout_seconds=TIMEOUT_S)
    print(f"\n[figure] grade = {_summary(verdict)}")
    return verdict


def _summary(verdict: dict) -> dict:
    keys = (
        "correct",
        "trusted",
        "speedup",
        "speedup_ci95_low",
        "speedup_ci95_high",
        "significant",
        "lease_ms",
        "lease_ms_by_phase",
        "error",
    )
    worst = max((r["max_rel_err"] or 0 for r in verdict["per_input"]), default=None)
    return {**{k: verdict[k] for k in keys}, "reasons": [r[:200] for r in verdict["reasons"]], "max_rel_err": worst}


def test_an_honest_candidate_is_correct_and_trusted(gpu_client):
    verdict = grade(gpu_client, HONEST)
    assert verdict["correct"] and verdict["trusted"], verdict["reasons"]
    assert verdict["error"] is None
    assert len(verdict["per_input"]) == 2 * (1 + len(SHAPES))
    assert {r["distribution"] for r in verdict["per_input"]} == {"normal", "uniform", "large"}
    assert verdict["speedup_ci95_low"] <= verdict["speedup"] <= verdict["speedup_ci95_high"]
    assert verdict["integrity"]["candidate"]["verified"] and verdict["integrity"]["reference"]["verified"]


def test_grading_a_50us_kernel_on_4_shapes_takes_at_most_2s_of_lease(gpu_client):
    """Issue 42's budget: both sides timed, 4 shapes, 2 sets each (816 ms on the H100)."""
    verdict = grade(gpu_client, HONEST)
    print(f"\n[figure] lease_ms = {verdict['lease_ms']:.0f} {verdict['lease_ms_by_phase']}")
    assert verdict["lease_ms"] <= 2000, verdict["lease_ms_by_phase"]


ADD_INPUTS = Code(
    """
import torch

def make_inputs(seed, shape):
    n = (shape or {"n": 1 << 20})["n"]
    generator = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(n, device="cuda", generator=generator), torch.randn(n, device="cuda", generator=generator)
""",
    "make_inputs",
)


def _relative_width(verdict: dict) -> float:
    return (verdict["speedup_ci95_high"] - verdict["speedup_ci95_low"]) / verdict["speedup"]


def test_a_60us_kernels_speedup_interval_is_within_4_percent(gpu_client):
    """Issue 42: for kernels of 20 us and more, (high - low) / speedup <= 0.04."""
    verdict = grade(gpu_client, HONEST)
    print(f"\n[figure] ci_width_60us = {_relative_width(verdict):.4f} (lease {verdict['lease_ms']:.0f} ms)")
    assert verdict["trusted"], verdict["reasons"]
    assert _relative_width(verdict) <= 0.04


def test_a_5us_kernels_speedup_interval_is_within_10_percent(gpu_client):
    """Issue 42: for a 5 us kernel (an add of two 1M-float vectors), (high - low) / speedup <= 0.10."""
    verdict = gpu_client.grade(
        Code("import torch\n\n\ndef kernel(a, b):\n    return torch.add(a, b)\n", "kernel"),
        Code("def reference(a, b):\n    return a + b\n", "reference"),
        ADD_INPUTS,
        {"shapes": [{"n": 1 << 19}, {"n": 3 << 18}, {"n": 1 << 21}]},
        timeout_seconds=TIMEOUT_S,
    )
    print(f"\n[figure] ci_width_5us = {_relative_width(verdict):.4f} {_summary(verdict)}")
    assert verdict["correct"] and verdict["trusted"], verdict["reasons"]
    assert _relative_width(verdict) <= 0.10


def test_an_honest_fp32_candidate_passes_a_float64_reference(gpu_client):
    verdict = grade(gpu_client, HONEST, reference_dtype="float64")
    assert verdict["correct"], verdict["reasons"]


def test_bf16_work_under_an_fp32_claim_fails_a_float64_reference(gpu_client):
    verdict = grade(
        gpu_client, candidate("    return (a.bfloat16() @ b.bfloat16()).float()\n"), reference_dtype="float64"
    )
    assert not verdict["correct"] and not verdict["trusted"]
    assert any("beyond rtol" in reason for reason in verdict["reasons"]), verdict["reasons"]


def test_a_result_wrong_on_one_unseen_shape_is_not_correct_and_names_it(gpu_client):
    """S7: hard-coded for the declared size; right there, wrong elsewhere (a row left zero)."""
    verdict = grade(
        gpu_client, candidate("    out = a @ b\n    if a.shape[0] != 1024:\n        out[0] = 0\n    return out\n")
    )
    assert not verdict["correct"]
    wrong = {r["shape"]["n"] for r in verdict["per_input"] if not r["correct"] and r["shape"]}
    assert wrong == {512, 768, 1536}
    assert all(r["correct"] for r in verdict["per_input"] if r["shape"] is None)
    assert any("wrong on shape n=768" in reason for reason in verdict["reasons"])


def test_inputs_zeroed_by_the_call_are_caught_against_a_copy_out_of_reach(gpu_client):
    """S4: the call zeroes b after computing: its outputs are right, its inputs are not."""
    verdict = grade(gpu_client, candidate("    out = a @ b\n    b.zero_()\n    return out\n"))
    assert not verdict["correct"]
    assert any("changed its input 1" in reason for reason in verdict["reasons"]), verdict["reasons"]


def test_an_answer_sheet_hunted_through_gc_finds_nothing_to_copy(gpu_client):
    """S3: no reference output ever exists in the candidate's process before it answers."""
    hunt = (
        "    import gc\n"
        "    for obj in gc.get_objects():\n"
        "        if isinstance(obj, torch.Tensor) and obj.is_cuda and obj.shape == (a.shape[0], b.shape[1])"
        " and obj is not a and obj is not b:\n"
        "            return obj.clone()\n"
        "    return torch.zeros(a.shape[0], b.shape[1], device=a.device)\n"
    )
    verdict = grade(gpu_client, candidate(hunt))
    assert not verdict["correct"] and not verdict["trusted"]


def test_nan_outputs_never_match(gpu_client):
    verdict = grade(
        gpu_client, candidate("    return torch.full((a.shape[0], b.shape[1]), float('nan'), device=a.device)\n")
    )
    assert not verdict["correct"]


def test_a_reference_slowed_in_the_candidates_process_is_not_trusted(gpu_client):
    """The candidate slows the reference beside it (Tensor.__matmul__ replaced at import) to
    inflate its speedup: the judge's reference, timed alone, disagrees."""
    sabotage = Code(
        "import torch\n\n_mm = torch.Tensor.__matmul__\n\n\n"
        "def _slow(a, b):\n    _mm(a, b)\n    _mm(a, b)\n    return _mm(a, b)\n\n\n"
        "torch.Tensor.__matmul__ = _slow\n\n\n"
        "def kernel(a, b):\n    return torch.mm(a, b)\n",
        "kernel",
    )
    verdict = grade(gpu_client, sabotage)
    assert verdict["correct"], verdict["reasons"]
    assert not verdict["trusted"]
    assert any("beside the candidate" in reason for reason in verdict["reasons"]), verdict["reasons"]


def test_a_candidate_that_does_not_import_is_an_error_of_its_phase(gpu_client):
    verdict = grade(gpu_client, Code("def kernel(a, b):\n    return a @@ b\n", "kernel"))
    assert verdict["error"]["phase"] == "candidate"
    assert not verdict["correct"] and not verdict["trusted"]


def test_a_module_built_once_per_shape_by_a_factory(gpu_client):
    """KernelBench's shape: nn.Modules made by factories on both sides, with the same weights."""
    model = (
        "import torch\n\n\n"
        "class Model(torch.nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n        self.linear = torch.nn.Linear(n, n)\n\n"
        "    def forward(self, a, b):\n        return torch.relu(self.linear(a)) + b\n\n\n"
        "def make(shape):\n    torch.manual_seed(0)\n    return Model((shape or {'n': 1024})['n']).cuda()\n"
    )
    verdict = gpu_client.grade(
        Code(model, "make", factory=True),
        Code(model, "make", factory=True),
        MAKE_INPUTS,
        {"shapes": SHAPES},
        timeout_seconds=TIMEOUT_S,
    )
    print(f"\n[figure] grade_factory = {_summary(verdict)}")
    assert verdict["correct"] and verdict["trusted"], verdict["reasons"]


def test_the_example_grades_an_honest_and_a_hard_coded_candidate(gpu_server):
    """examples/grade.py as a user runs it."""
    example = REPO / "examples" / "grade.py"
    env = {**os.environ, "KCORAL_GPU_URL": gpu_server.url}
    done = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=600)
    print(done.stdout)
    assert done.returncode == 0, done.stderr[-2000:]
    honest, hard_coded = done.stdout.split("hard-coded:")
    assert "correct=True trusted=True" in honest and "speedup" in honest
    assert "correct=False" in hard_coded and "wrong on shape n=512" in hard_coded


def test_kcoral_grade_over_the_kernelbench_examples(gpu_server, tmp_path):
    """`kcoral grade DIR --out FILE.csv` on examples/kernelbench, float64 reference: the twenty
    honest candidates are correct, the three written wrong (examples/kernelbench/README.md) are
    not, each for its reason."""
    examples = REPO / "examples" / "kernelbench"
    out = tmp_path / "grades.csv"
    command = [sys.executable, "-m", "kcoral", "grade", str(examples), "--out", str(out), "--url", gpu_server.url]
    done = subprocess.run(
        command + ["--reference-dtype", "float64", "--timeout-seconds", "300"],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=900,
    )
    print(done.stdout)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    rows = {row["problem"]: row for row in csv.DictReader(out.open())}
    assert len(rows) == 23
    wrong = {name for name, row in rows.items() if row["correct"] != "true"}
    assert wrong == {"matmul", "relu", "rmsnorm"}, {n: rows[n]["reasons"][:300] for n in wrong}
    assert "changed its input 0" in rows["relu"]["reasons"]
    assert "hidden=1024" in rows["rmsnorm"]["reasons"]
