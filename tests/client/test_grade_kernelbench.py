"""`kcoral grade` without a GPU, torch or a server (issue 42): KernelBench problem folders
(kcoral.grading.kernelbench), the code and cfg each problem becomes, the adapters' behaviour
under a stand-in torch module, the CSV and the table (kcoral.grading.report), and the command
line (kcoral.tools.grade).

The real grade runs only on a GPU server, so the command's network part is tested with
AsyncClient.grade replaced by a fake coroutine that returns canned verdicts: what is checked is
what the command sends, how it bounds concurrency, and what it makes of the answers."""

from __future__ import annotations

import ast
import asyncio
import csv
import shutil
import sys
import types
from pathlib import Path

import pytest

from kcoral import cli
from kcoral.async_client import AsyncClient
from kcoral.errors import TransportError
from kcoral.grading import report
from kcoral.grading.plan import make_plan
from kcoral.grading.kernelbench import INIT_SEED, Problem, ProblemError, find_problems, grade_task

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "kernelbench"
WRONG_ON_PURPOSE = {"matmul", "relu", "rmsnorm"}

PROBLEM = """\
import torch


class Model(torch.nn.Module):
    def __init__(self, width):
        self.width = width
        self.seed = torch.seed


batch_size = 2
width = 8
{shapes}

def get_inputs():
    return [torch.randn(batch_size, width), "mode"]


def get_init_inputs():
    return [width]
"""

CANDIDATE = """\
import torch

width = 999  # the candidate's own copy of a size does not decide the size


class ModelNew(torch.nn.Module):
    def __init__(self, width):
        self.width = width
        self.seed = torch.seed


def get_init_inputs():  # never used: ModelNew is built from the problem's
    return [-1]
"""


def write_problem(folder: Path, name: str, shapes: str = 'SHAPES = [{"width": 3}]', candidate: bool = True) -> Problem:
    (folder / f"{name}.py").write_text(PROBLEM.format(shapes=shapes))
    if candidate:
        (folder / f"{name}_new.py").write_text(CANDIDATE)
    return next(problem for problem in find_problems(folder) if problem.name == name)


def bad_shapes(tmp_path: Path, shapes: str) -> str:
    with pytest.raises(ProblemError) as info:
        grade_task(write_problem(tmp_path, "p", shapes))
    return str(info.value)


# ------------------------------------------------------------------ the folder


def test_the_examples_are_twenty_three_problems_each_with_its_candidate():
    problems = find_problems(EXAMPLES)
    names = [problem.name for problem in problems]
    assert names == sorted(names) and len(names) == 23
    assert all(problem.candidate_path == EXAMPLES / f"{problem.name}_new.py" for problem in problems)
    assert WRONG_ON_PURPOSE <= set(names)
    readme = (EXAMPLES / "README.md").read_text()
    assert all(f"`{name}_new.py`" in readme for name in WRONG_ON_PURPOSE)


def test_every_example_becomes_a_task_grade_takes_and_six_or_more_add_two_or_three_shapes():
    with_shapes = 0
    for problem in find_problems(EXAMPLES):
        candidate, reference, make_inputs, cfg = grade_task(problem)
        make_plan({**cfg, "seeds": 8, "reference_dtype": "float64"}, candidate, reference, make_inputs)
        if "shapes" in cfg:
            assert 2 <= len(cfg["shapes"]) <= 3, problem.name
            with_shapes += 1
    assert with_shapes >= 6


def test_a_problem_without_candidate_is_listed_and_helpers_and_candidates_are_not_problems(tmp_path):
    write_problem(tmp_path, "alone", candidate=False)
    write_problem(tmp_path, "paired")
    (tmp_path / "_helpers.py").write_text("")
    (tmp_path / "orphan_new.py").write_text(CANDIDATE)
    (tmp_path / "notes.txt").write_text("")
    problems = find_problems(tmp_path)
    assert [(p.name, p.candidate_path) for p in problems] == [
        ("alone", None),
        ("paired", tmp_path / "paired_new.py"),
    ]
    with pytest.raises(ProblemError, match="alone.py: no candidate alone_new.py"):
        grade_task(problems[0])


def test_a_path_that_is_not_a_folder_is_refused(tmp_path):
    with pytest.raises(NotADirectoryError):
        find_problems(tmp_path / "missing")


# ------------------------------------------------------------------ SHAPES


def test_no_shapes_means_the_declared_sizes_alone(tmp_path):
    *_, cfg = grade_task(write_problem(tmp_path, "p", shapes=""))
    assert cfg == {}


def test_shapes_are_read_without_running_the_file(tmp_path):
    problem = write_problem(
        tmp_path, "p", 'raise SystemExit("ran")\nSHAPES = [{"width": 3}, {"batch_size": 5, "width": 1.5}]'
    )
    *_, cfg = grade_task(problem)
    assert cfg == {"shapes": [{"width": 3}, {"batch_size": 5, "width": 1.5}]}


@pytest.mark.parametrize(
    "shapes, expected",
    [
        ('SHAPES = [{"depth": 3}]', "SHAPES[0] key 'depth' is not a size of the problem"),
        ('SHAPES = [{"width": 3}, {"get_inputs": 3}]', "SHAPES[1] key 'get_inputs' is not a size"),
        ('SHAPES = [{"width": "3"}]', "SHAPES[0] key 'width': the value must be an int or a float"),
        ('SHAPES = [{"width": True}]', "key 'width': the value must be an int or a float"),
        ('SHAPES = [{"width": width * 2}]', "SHAPES must be a literal list of dicts"),
        ('SHAPES = {"width": 3}', "SHAPES must be a list of dicts, not a dict"),
        ('SHAPES = [("width", 3)]', "SHAPES[0] must be a non-empty dict, not ('width', 3)"),
        ('SHAPES = [{"width": 3}, {}]', "SHAPES[1] must be a non-empty dict, not {}"),
        ("SHAPES = [" + '{"width": 3}, ' * 9 + "]", "SHAPES has 9 entries; grade takes at most 8"),
        ('batch_size = batch_size * 2\nSHAPES = [{"batch_size": 4}]', "key 'batch_size' is not a size"),
    ],
)
def test_a_bad_shapes_names_the_file_and_the_key(tmp_path, shapes, expected):
    message = bad_shapes(tmp_path, shapes)
    assert str(tmp_path / "p.py") in message
    assert expected in message


def test_a_problem_that_does_not_parse_says_where(tmp_path):
    (tmp_path / "p.py").write_text("def broken(:\n")
    (tmp_path / "p_new.py").write_text(CANDIDATE)
    with pytest.raises(ProblemError, match=r"p\.py:1: does not parse"):
        grade_task(find_problems(tmp_path)[0])


# ------------------------------------------------------------------ the code objects


def test_the_three_codes_parse_and_name_functions_defined_in_them():
    for problem in find_problems(EXAMPLES):
        candidate, reference, make_inputs, _ = grade_task(problem)
        assert (candidate.factory, reference.factory, make_inputs.factory) == (True, True, False)
        assert len({candidate.name, reference.name, make_inputs.name}) == 3
        for code in (candidate, reference, make_inputs):
            assert code.name.startswith("_kcoral_grade_")
            tree = ast.parse(code.source)
            defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
            assert code.name in defined, (problem.name, code.name)


def test_the_candidate_source_is_the_problem_then_the_candidate_then_the_adapter():
    problem = find_problems(EXAMPLES)[0]
    candidate, reference, make_inputs, _ = grade_task(problem)
    problem_source = problem.path.read_text()
    candidate_source = problem.candidate_path.read_text()
    assert candidate.source.startswith(problem_source)
    at_candidate = candidate.source.index(candidate_source)
    assert len(problem_source) < at_candidate < candidate.source.index(f"def {candidate.name}(")
    for code in (reference, make_inputs):
        assert code.source.startswith(problem_source) and candidate_source not in code.source


class FakeTensor:
    def __init__(self, shape, seed, device="cpu"):
        self.shape, self.seed, self.device = shape, seed, device

    def cuda(self):
        return FakeTensor(self.shape, self.seed, "cuda")


class FakeModule:
    def cuda(self):
        self.device = "cuda"
        return self


@pytest.fixture
def fake_torch(monkeypatch):
    """Just what the adapters and the test problem use: manual_seed, randn, Tensor, nn.Module."""
    torch = types.ModuleType("torch")
    torch.seed = None
    torch.Tensor = FakeTensor
    torch.nn = types.SimpleNamespace(Module=FakeModule)
    torch.manual_seed = lambda seed: setattr(torch, "seed", seed)
    torch.randn = lambda *shape: FakeTensor(shape, torch.seed)
    monkeypatch.setitem(sys.modules, "torch", torch)
    return torch


def load(code) -> types.FunctionType:
    namespace: dict = {"__name__": "graded"}
    exec(compile(code.source, code.name, "exec"), namespace)
    return namespace[code.name]


def test_make_inputs_sets_the_sizes_and_the_seed_and_moves_tensors_to_cuda(tmp_path, fake_torch):
    *_, make_inputs_code, _ = grade_task(write_problem(tmp_path, "p"))
    make_inputs = load(make_inputs_code)
    tensor, mode = make_inputs(7, None)
    assert (tensor.shape, tensor.seed, tensor.device, mode) == ((2, 8), 7, "cuda", "mode")
    assert make_inputs(8, {"width": 3})[0].shape == (2, 3)
    assert make_inputs(9, None)[0].shape == (2, 8)  # the shape before does not linger
    assert isinstance(make_inputs(9, None), tuple)


def test_both_models_are_built_under_the_same_seed_from_the_problems_init_inputs(tmp_path, fake_torch):
    candidate_code, reference_code, *_ = grade_task(write_problem(tmp_path, "p"))
    make_candidate, make_reference = load(candidate_code), load(reference_code)
    for shape, width in ((None, 8), ({"width": 3}, 3), (None, 8)):
        fake_torch.manual_seed(1234)  # whatever ran before
        reference = make_reference(shape)
        fake_torch.manual_seed(1234)
        candidate = make_candidate(shape)
        assert type(candidate).__name__ == "ModelNew"
        assert (reference.width, reference.seed, reference.device) == (width, INIT_SEED, "cuda")
        assert (candidate.width, candidate.seed, candidate.device) == (width, INIT_SEED, "cuda")


# ------------------------------------------------------------------ the report

CORRECT = {
    "correct": True,
    "per_input": [],
    "shapes_used": 3,
    "speedup": 1.8734,
    "speedup_ci95_low": 1.8,
    "speedup_ci95_high": 1.95,
    "significant": True,
    "trusted": True,
    "reasons": [],
    "conditions": [],
    "integrity": {},
    "lease_ms": 412.5,
    "error": None,
}
WRONG = {
    **CORRECT,
    "correct": False,
    "speedup": 0.97,
    "speedup_ci95_low": 0.9,
    "speedup_ci95_high": 1.04,
    "significant": False,
    "trusted": False,
    "reasons": ["outputs differ at shape {'hidden': 1024}", "input 0 was written"],
}
FAILED = {
    **CORRECT,
    "correct": False,
    "trusted": False,
    "significant": False,
    "speedup": None,
    "speedup_ci95_low": None,
    "speedup_ci95_high": None,
    "shapes_used": 0,
    "lease_ms": 80.0,
    "reasons": ["the candidate failed (runtime): RuntimeError: shape mismatch\n  at line 3"],
    "error": {"phase": "candidate", "kind": "runtime", "message": "RuntimeError: shape mismatch\n  at line 3"},
}
ROWS = [("softmax", CORRECT), ("rmsnorm", WRONG), ("conv2d", FAILED)]


def test_the_csv_holds_one_line_per_problem(tmp_path):
    path = tmp_path / "grades.csv"
    report.write_csv(path, ROWS)
    with open(path, newline="") as file:
        lines = list(csv.DictReader(file))
    assert tuple(lines[0]) == report.CSV_COLUMNS
    assert [line["problem"] for line in lines] == ["softmax", "rmsnorm", "conv2d"]
    assert lines[0] | {} == {
        "problem": "softmax",
        "correct": "true",
        "speedup": "1.8734",
        "speedup_ci95_low": "1.8",
        "speedup_ci95_high": "1.95",
        "significant": "true",
        "trusted": "true",
        "shapes_used": "3",
        "lease_ms": "412.5",
        "reasons": "",
        "error": "",
    }
    assert lines[1]["correct"] == "false"
    assert lines[1]["reasons"] == "outputs differ at shape {'hidden': 1024}; input 0 was written"
    assert (lines[2]["speedup"], lines[2]["speedup_ci95_low"], lines[2]["trusted"]) == ("", "", "false")
    assert lines[2]["error"] == "candidate/runtime: RuntimeError: shape mismatch\n  at line 3"


def test_the_table_is_aligned_and_shows_reasons_and_errors():
    table = report.summary_table(ROWS)
    header, *lines, counts = table.splitlines()
    assert header.split() == [*report.TABLE_COLUMNS, "reasons"]
    assert lines[0].split() == ["softmax", "yes", "1.87", "1.80-1.95", "yes", "yes", "3", "412"]
    assert lines[1].split()[:8] == ["rmsnorm", "no", "0.97", "0.90-1.04", "no", "no", "3", "412"]
    assert lines[1].endswith("outputs differ at shape {'hidden': 1024}; input 0 was written")
    assert lines[2].split()[:8] == ["conv2d", "error", "-", "-", "no", "no", "0", "80"]
    assert lines[2].endswith("  error candidate/runtime: RuntimeError: shape mismatch at line 3")  # once
    for column in report.TABLE_COLUMNS[1:] + ("reasons",):
        start = header.index(column)
        filled = [line for line in lines if len(line) > start]  # softmax has no reasons
        assert all(line[start - 2 : start] == "  " and line[start] != " " for line in filled), column
    assert counts == "3 problems: 1 correct, 1 incorrect, 1 not graded"


# ------------------------------------------------------------------ the command line


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    status = cli.main(["grade", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_help_teaches_the_format_the_naming_rule_shapes_and_the_csv(capsys):
    status, out, _ = run_cli(capsys, "--help")
    assert status == 0
    for taught in ("NAME_new.py", "ModelNew", "get_init_inputs()", "SHAPES = [", "speedup_ci95_low", "kcoral grade "):
        assert taught in out, taught
    status, out, _ = run_cli(capsys)
    assert status == 2
    assert cli.main(["--help"]) == 0 and "kcoral grade" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, named",
    [
        ([], "DIR"),
        (["--out", "x.csv"], "DIR"),
        (["{examples}"], "--out"),
        (["{tmp}/nowhere", "--out", "x.csv"], "argument DIR: {tmp}/nowhere: no such directory"),
        (["{tmp}", "--out", "x.csv"], "argument DIR: {tmp} holds no problem"),
        (["{examples}", "--out", "{tmp}"], "argument --out: {tmp} is a directory"),
        (["{examples}", "--out", "x.csv", "--concurrency", "0"], "argument --concurrency: must be an integer >= 1"),
        (["{examples}", "--out", "x.csv", "--seeds", "many"], "argument --seeds: must be an integer from 1 to 8"),
        (["{examples}", "--out", "x.csv", "--seeds", "9"], "argument --seeds: must be an integer from 1 to 8"),
        (["{examples}", "--out", "x.csv", "--timeout-seconds", "-1"], "argument --timeout-seconds"),
        (["{examples}", "--out", "x.csv", "--reference-dtype", "float16"], "argument --reference-dtype"),
        (["{examples}", "--out", "x.csv", "--url", "http://a:1,,http://b:1"], "argument --url/--ca"),
    ],
)
def test_a_bad_command_line_exits_2_naming_the_argument(capsys, tmp_path, argv, named):
    fill = {"examples": str(EXAMPLES), "tmp": str(tmp_path)}
    status, out, err = run_cli(capsys, *(arg.format(**fill) for arg in argv))
    assert status == 2
    assert named.format(**fill) in err and out == ""


class FakeGrade:
    """AsyncClient.grade's stand-in: a canned verdict per problem, picked by the candidate's
    source; it records what each call was given and the most calls in flight at once."""

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers
        self.calls: list[tuple] = []
        self.now = self.most = 0

    async def __call__(self, candidate, reference, make_inputs, cfg=None, *, timeout_seconds=None):
        self.calls.append((candidate, reference, make_inputs, cfg, timeout_seconds))
        self.now += 1
        self.most = max(self.most, self.now)
        await asyncio.sleep(0.01)
        self.now -= 1
        answer = next(value for marker, value in self.answers.items() if marker in candidate.source)
        if isinstance(answer, Exception):
            raise answer
        return answer


def graded_folder(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "problems"
    folder.mkdir()
    for name in names:
        shutil.copy(EXAMPLES / f"{name}.py", folder)
        shutil.copy(EXAMPLES / f"{name}_new.py", folder)
    return folder


def read_rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="") as file:
        return {line["problem"]: line for line in csv.DictReader(file)}


def test_every_problem_graded_exits_0_even_when_some_are_incorrect(capsys, tmp_path, monkeypatch, dead_url):
    folder = graded_folder(tmp_path, ["softmax", "rmsnorm", "gelu", "cumsum", "layernorm"])
    fake = FakeGrade({"/ 4096": WRONG, "class ModelNew": CORRECT})
    monkeypatch.setattr(AsyncClient, "grade", fake)
    out_csv = tmp_path / "out" / "grades.csv"
    argv = [str(folder), "--out", str(out_csv), "--url", dead_url, "--concurrency", "2"]
    status, out, err = run_cli(capsys, *argv, "--seeds", "3", "--reference-dtype", "float64", "--timeout-seconds", "90")
    assert status == 0, err
    rows = read_rows(out_csv)
    assert list(rows) == ["cumsum", "gelu", "layernorm", "rmsnorm", "softmax"]
    assert rows["rmsnorm"]["correct"] == "false" and rows["softmax"]["correct"] == "true"
    assert "rmsnorm  " in out and "5 problems: 4 correct, 1 incorrect, 0 not graded" in out
    assert f"wrote {out_csv}" in err
    assert fake.most == 2
    rmsnorm_call = next(call for call in fake.calls if "/ 4096" in call[0].source)
    assert rmsnorm_call[3] == {
        "shapes": [{"batch_size": 4, "seq_len": 100}, {"hidden": 1024}],
        "seeds": 3,
        "reference_dtype": "float64",
    }
    assert rmsnorm_call[4] == 90.0


def test_problems_that_could_not_be_graded_are_rows_and_exit_1(capsys, tmp_path, monkeypatch, dead_url):
    folder = graded_folder(tmp_path, ["softmax", "gelu", "relu"])
    (folder / "lonely.py").write_text((EXAMPLES / "gelu.py").read_text())
    (folder / "shapeless.py").write_text(PROBLEM.format(shapes='SHAPES = [{"depth": 2}]'))
    (folder / "shapeless_new.py").write_text(CANDIDATE)
    fake = FakeGrade(
        {"relu_": FAILED, "softmax": TransportError("POST /grade: connection refused"), "class ModelNew": CORRECT}
    )
    monkeypatch.setattr(AsyncClient, "grade", fake)
    status, out, _ = run_cli(capsys, str(folder), "--out", str(tmp_path / "grades.csv"), "--url", dead_url)
    assert status == 1
    rows = read_rows(tmp_path / "grades.csv")
    assert rows["gelu"]["correct"] == "true" and rows["gelu"]["error"] == ""
    assert rows["lonely"]["error"] == "problem/missing_candidate: no lonely_new.py beside it"
    assert rows["shapeless"]["error"].startswith("problem/bad_problem: ")
    assert "key 'depth'" in rows["shapeless"]["error"]
    assert rows["relu"]["error"].startswith("candidate/runtime: RuntimeError")
    assert rows["softmax"]["error"] == "request/TransportError: POST /grade: connection refused"
    assert rows["softmax"]["speedup"] == "" and rows["softmax"]["correct"] == "false"
    assert len(fake.calls) == 3  # neither the lonely nor the shapeless problem was sent
    assert "5 problems: 1 correct, 0 incorrect, 4 not graded" in out


def test_a_server_that_cannot_be_reached_is_a_request_error_per_problem(capsys, tmp_path, dead_url):
    folder = graded_folder(tmp_path, ["gelu"])
    status, out, _ = run_cli(capsys, str(folder), "--out", str(tmp_path / "grades.csv"), "--url", dead_url)
    assert status == 1
    error = read_rows(tmp_path / "grades.csv")["gelu"]["error"]
    assert error.startswith("request/TransportError: ") and dead_url in error
