"""grade's client half (kcoral.grading): its cfg checks, the programs of its three phases, and
the verdict assembled from their results. The phases themselves run on a GPU server
(tests/gpu/test_grade.py); here their results are ProgramResults built as the decoder builds
them, holding what each phase returns."""

import pytest

from kcoral.grading import Code, drive, grade_steps, make_plan
from kcoral.grading.verdict import verdict
from kcoral.result import ProgramResult

CANDIDATE = Code("def kernel(x):\n    return x * 2\n", "kernel")
REFERENCE = Code("def reference(x):\n    return x + x\n", "reference")
MAKE_INPUTS = Code("def make_inputs(seed, shape):\n    return (seed,)\n", "make_inputs")


def program_result(status="COMPLETED", results=None, error=None, lease_held_ms=100.0) -> ProgramResult:
    return ProgramResult(
        status=status,
        request_id="r",
        queue_ms=0.0,
        elapsed_ms=1.0,
        lease_wait_ms=0.0,
        lease_held_ms=lease_held_ms,
        results=results or {},
        stdout="",
        stderr="",
        stdout_truncated=False,
        stderr_truncated=False,
        error=error,
    )


def timing(median_us: float, *, trusted=True, flags=()) -> dict:
    return {
        "latency_ms_median": median_us / 1e3,
        "integrity": {"verified": True, "trusted": trusted, "flags": list(flags), "outputs_unchecked": []},
    }


def paired(candidate_us: float, reference_us: float, **kw) -> dict:
    ratio = candidate_us / reference_us
    out = timing(candidate_us, **kw)
    out.update(
        reference=timing(reference_us),
        ratio_median=ratio,
        ratio_ci95_low=ratio * 0.98,
        ratio_ci95_high=ratio * 1.02,
        speedup_median=1 / ratio,
        outputs_match_reference=True,
    )
    return out


def row(shape=None, seed_index=0, correct=True, why=None) -> dict:
    out = {"shape": shape, "seed_index": seed_index, "distribution": "normal", "correct": correct}
    out.update(max_abs_err=0.0, max_rel_err=0.0)
    if why:
        out["why"] = why
    return out


def run_phases(plan_cfg: dict, per_input: list, paired_timing: dict, alone: dict, unusable=()) -> dict:
    steps = grade_steps(CANDIDATE, REFERENCE, MAKE_INPUTS, plan_cfg)
    answers = iter(
        [
            program_result(results={"inputs": {"sets": b"sets", "unusable": list(unusable)}}),
            program_result(results={"answer": {"answers": b"answers", "timing": paired_timing}}),
            program_result(results={"judgement": {"per_input": per_input, "reference_timing": alone}}),
        ]
    )
    programs = []
    verdict_ = drive(steps, lambda program: programs.append(program) or next(answers))
    assert len(programs) == 3
    return verdict_


SHAPES = {"shapes": [{"n": 64}, {"n": 128}, {"n": 256}]}


def test_an_honest_candidate_is_correct_trusted_with_its_speedup_and_interval():
    rows = [row(), row(seed_index=1)] + [row(shape=s) for s in SHAPES["shapes"]]
    out = run_phases(SHAPES, rows, paired(50.0, 100.0), timing(101.0))
    assert out["correct"] and out["trusted"], out["reasons"]
    assert out["speedup"] == pytest.approx(2.0)
    assert out["speedup_ci95_low"] < 2.0 < out["speedup_ci95_high"]
    assert out["significant"]
    assert out["shapes_used"] == 4
    assert out["lease_ms"] == 300.0
    assert out["lease_ms_by_phase"] == {"inputs": 100.0, "candidate": 100.0, "judge": 100.0}
    assert out["conditions"] == [] and out["error"] is None


def test_a_result_wrong_on_one_shape_is_not_correct_and_names_that_shape():
    rows = [row(), row(shape={"n": 128}, correct=False, why="return: 40 of 128 elements beyond rtol 0.01")]
    out = run_phases(SHAPES, rows, paired(50.0, 100.0), timing(100.0))
    assert not out["correct"] and not out["trusted"]
    assert "wrong on shape n=128 (seed 0, normal values)" in out["reasons"][0]


def test_a_reference_slowed_beside_the_candidate_is_not_trusted():
    """The paired reference ran in the candidate's process: 300 us there, 100 us alone."""
    out = run_phases(SHAPES, [row()], paired(100.0, 300.0), timing(100.0))
    assert out["correct"] and not out["trusted"]
    assert any("beside the candidate" in reason for reason in out["reasons"])


def test_an_untrusted_candidate_benchmark_is_not_trusted_and_says_why():
    out = run_phases(SHAPES, [row()], paired(50.0, 100.0, trusted=False, flags=["seen 3x faster"]), timing(100.0))
    assert not out["trusted"]
    assert any("seen 3x faster" in reason for reason in out["reasons"])


def test_an_implausible_speedup_is_a_condition_not_a_failure():
    out = run_phases(SHAPES, [row()], paired(5.0, 100.0), timing(100.0))
    assert out["trusted"]
    assert any("plausibility bound of 10x" in c for c in out["conditions"])


def test_fewer_extra_shapes_and_unusable_draws_are_said():
    out = run_phases({}, [row()], paired(50.0, 100.0), timing(100.0), unusable=[{"shape": None}])
    assert out["shapes_used"] == 1
    assert any("graded on 0 shapes beyond" in c for c in out["conditions"])
    assert any("1 drawn input sets were unusable" in c for c in out["conditions"])


def test_a_failed_candidate_benchmark_leaves_no_speedup():
    failed = {"error": {"kind": "correctness", "message": "output 1 differs"}}
    out = run_phases(SHAPES, [row()], failed, timing(100.0))
    assert out["speedup"] is None and not out["trusted"]
    assert any("benchmark failed (correctness)" in reason for reason in out["reasons"])


def test_a_failed_phase_ends_the_grade_with_an_error_naming_it():
    steps = grade_steps(CANDIDATE, REFERENCE, MAKE_INPUTS, SHAPES)
    ok = program_result(results={"inputs": {"sets": b"s", "unusable": []}})
    broken = program_result(status="FAILED", error={"kind": "compile", "message": "SyntaxError in candidate"})
    results = iter([ok, broken])
    out = drive(steps, lambda program: next(results))
    assert out["error"] == {"phase": "candidate", "kind": "compile", "message": "SyntaxError in candidate"}
    assert not out["correct"] and not out["trusted"] and out["lease_ms"] == 200.0
    assert out["reasons"] == ["the candidate failed (compile): SyntaxError in candidate"]


def test_the_candidate_program_binds_the_reference_before_the_candidate_is_imported():
    steps = grade_steps(CANDIDATE, REFERENCE, MAKE_INPUTS, SHAPES)
    next(steps)
    candidate_program = steps.send(program_result(results={"inputs": {"sets": b"s", "unusable": []}}))
    ids = [i["id"] for i in candidate_program.instructions if i["op"] in ("upload", "get_function")]
    assert ids.index("reference") < ids.index("candidate_module")
    assert "make_inputs_module" not in ids  # the candidate's process never holds make_inputs
    # The sets are read before the candidate's import can patch the reader.
    order = [i.get("id") for i in candidate_program.instructions]
    assert order.index("unpack_sets") < order.index("candidate_module")


def test_host_only_steps_run_off_the_lease_and_the_gpu_steps_under_it():
    steps = grade_steps(CANDIDATE, REFERENCE, MAKE_INPUTS, SHAPES)
    programs = [next(steps), steps.send(program_result(results={"inputs": {"sets": b"s", "unusable": []}}))]
    programs.append(steps.send(program_result(results={"answer": {"answers": b"a", "timing": {}}})))
    cpu_only = {
        i["name"]: i.get("cpu_only", False)
        for program in programs
        for i in program.instructions
        if i["op"] == "get_function" and i["id"].startswith("grade_")
    }
    assert cpu_only == {
        "draw_inputs": False,
        "pack_inputs": True,
        "unpack_sets": True,
        "answer": False,
        "pack_answers": True,
        "unpack_for_judge": True,
        "judge": False,
    }


@pytest.mark.parametrize(
    "cfg, field",
    [
        ({"shapes": {"n": 1}}, "cfg['shapes']"),
        ({"shapes": [{"n": "big"}]}, "cfg['shapes'][0]['n']"),
        ({"seeds": 0}, "cfg['seeds']"),
        ({"reference_dtype": "float16"}, "cfg['reference_dtype']"),
        ({"tolerance": {"rtol": 1e-3}}, "cfg['tolerance']"),
        ({"plausible_speedup": 0.5}, "cfg['plausible_speedup']"),
        ({"shape": []}, "unknown cfg key 'shape'"),
    ],
)
def test_bad_cfg_is_refused_naming_the_field(cfg, field):
    with pytest.raises((ValueError, TypeError)) as raised:
        make_plan(cfg, CANDIDATE, REFERENCE, MAKE_INPUTS)
    assert field in str(raised.value)


def test_code_must_name_a_callable_and_make_inputs_is_no_factory():
    with pytest.raises(ValueError, match="must name a callable"):
        Code("x = 1\n", "not a name")
    with pytest.raises(ValueError, match="cannot be a factory"):
        make_plan({}, CANDIDATE, REFERENCE, Code(MAKE_INPUTS.source, "make_inputs", factory=True))
    with pytest.raises(TypeError, match="kcoral.grading.Code"):
        make_plan({}, "def f(): pass", REFERENCE, MAKE_INPUTS)


def test_verdict_reads_only_the_three_results():
    plan = make_plan(SHAPES, CANDIDATE, REFERENCE, MAKE_INPUTS)
    out = verdict(
        program_result(results={"inputs": {"sets": b"", "unusable": []}}),
        program_result(results={"answer": {"answers": b"", "timing": paired(80.0, 100.0)}}),
        program_result(results={"judgement": {"per_input": [row()], "reference_timing": timing(100.0)}}),
        plan,
    )
    assert out["integrity"]["candidate"]["verified"] and out["integrity"]["reference"]["verified"]
