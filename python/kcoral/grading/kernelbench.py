"""KernelBench's problem format, turned into what `grade` takes (issue 42).

A problem is one Python file, NAME.py, as KernelBench writes them:

    class Model(nn.Module): ...          # the reference computation
    batch_size = 16                      # module-level sizes, assigned literals
    dim = 16384
    SHAPES = [{"batch_size": 8, "dim": 4096}]   # optional: extra sizes to grade at
    def get_inputs(): return [torch.randn(batch_size, dim)]
    def get_init_inputs(): return []     # Model's constructor arguments

Its candidate is NAME_new.py beside it, defining ``ModelNew`` (same constructor arguments,
same forward). A file whose name ends in ``_new.py`` is never a problem itself; names
starting with ``_`` (``__init__.py``) are skipped.

SHAPES is read with ``ast``, without running the file (this machine need not have torch):
it must be a literal list of at most 8 (grade's limit) non-empty dicts, each key a module-level
name the file assigns a literal (its size globals), each value an int or a float. The problem is graded at its declared
sizes and at each SHAPES entry.

The three Code objects are the files' sources with a small adapter appended; the adapter's
names start with ``_kcoral_grade_`` so that they cannot clash with the user's:

- make_inputs(seed, shape): the declared sizes, then the shape's; torch.manual_seed(seed);
  get_inputs(), its tensors moved to CUDA (other entries pass through).
- the reference's make(shape): the sizes; torch.manual_seed(INIT_SEED);
  Model(*get_init_inputs()).cuda().
- the candidate's make(shape): its source is the problem's, then the candidate's, then the
  adapter; likewise with ModelNew, and with the problem's get_init_inputs even where the
  candidate file defines its own (KernelBench builds both models from the problem's).

The candidate's source follows the problem's, so it cannot use ``from __future__`` imports.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# From its own module, not the package: the package may re-export this one without a cycle.
from kcoral.grading.code import Code
from kcoral.grading.plan import MAX_SHAPES

__all__ = ["CANDIDATE_SUFFIX", "INIT_SEED", "Problem", "ProblemError", "find_problems", "grade_task", "read_shapes"]

CANDIDATE_SUFFIX = "_new.py"

#: The seed both models are built under, so that they get the same weights; KernelBench's own
#: eval seeds 42 before building each.
INIT_SEED = 42

MAKE_INPUTS = "_kcoral_grade_make_inputs"
MAKE_REFERENCE = "_kcoral_grade_make_reference"
MAKE_CANDIDATE = "_kcoral_grade_make_candidate"


class ProblemError(ValueError):
    """A problem file that cannot be graded as written; the message names the file."""


@dataclass(frozen=True)
class Problem:
    name: str
    path: Path
    candidate_path: Path | None  # None: no NAME_new.py beside it, reported as an error


def find_problems(directory: str | Path) -> list[Problem]:
    """The problems of ``directory`` (not recursive), sorted by name, each with its candidate
    file or None. Raises NotADirectoryError for a path that is not a folder."""
    folder = Path(directory)
    if not folder.is_dir():
        raise NotADirectoryError(f"{folder}: not a directory")
    problems = []
    for path in sorted(folder.glob("*.py")):
        if path.name.endswith(CANDIDATE_SUFFIX) or path.name.startswith("_"):
            continue
        candidate = path.with_name(path.stem + CANDIDATE_SUFFIX)
        problems.append(Problem(path.stem, path, candidate if candidate.is_file() else None))
    return problems


def grade_task(problem: Problem) -> tuple[Code, Code, Code, dict[str, Any]]:
    """(candidate, reference, make_inputs, cfg) for ``client.grade``. cfg holds ``shapes``
    when the problem has SHAPES; the caller adds seeds, reference_dtype and the like.
    Raises ProblemError for a problem without a candidate or with a bad SHAPES."""
    if problem.candidate_path is None:
        raise ProblemError(f"{problem.path}: no candidate {problem.name}{CANDIDATE_SUFFIX} beside it")
    problem_source = problem.path.read_text()
    candidate_source = problem.candidate_path.read_text()
    shapes, declared = read_shapes(problem_source, problem.path)
    sizes = _sizes_block(shapes, declared)

    inputs_source = _join(problem_source, sizes + _MAKE_INPUTS)
    reference_source = _join(problem_source, sizes + _MAKE_REFERENCE)
    candidate_source = _join(
        problem_source + _KEEP_PROBLEM_INIT_INPUTS,
        f"\n# ---- {problem.candidate_path.name} ----\n" + candidate_source,
        sizes + _MAKE_CANDIDATE,
    )
    cfg: dict[str, Any] = {"shapes": shapes} if shapes else {}
    return (
        Code(candidate_source, MAKE_CANDIDATE, factory=True),
        Code(reference_source, MAKE_REFERENCE, factory=True),
        Code(inputs_source, MAKE_INPUTS),
        cfg,
    )


def read_shapes(source: str, path: Path) -> tuple[list[dict[str, int | float]], dict[str, Any]]:
    """(SHAPES, or [] where the file has none; the file's module-level literal assignments).
    Neither imports nor runs the file."""
    try:
        tree = ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        raise ProblemError(f"{path}:{exc.lineno}: does not parse: {exc.msg}") from None
    declared: dict[str, Any] = {}
    shapes_node = None
    for statement in tree.body:
        for name, value in _assignments(statement):
            if name == "SHAPES":
                shapes_node = value
                continue
            try:
                declared[name] = ast.literal_eval(value)
            except (ValueError, TypeError):
                declared.pop(name, None)  # reassigned to something computed: not a size
    if shapes_node is None:
        return [], declared
    return _check_shapes(shapes_node, declared, path), declared


def _assignments(statement: ast.stmt) -> list[tuple[str, ast.expr]]:
    if isinstance(statement, ast.Assign):
        return [(target.id, statement.value) for target in statement.targets if isinstance(target, ast.Name)]
    if isinstance(statement, ast.AnnAssign) and statement.value is not None and isinstance(statement.target, ast.Name):
        return [(statement.target.id, statement.value)]
    return []


def _check_shapes(node: ast.expr, declared: dict[str, Any], path: Path) -> list[dict[str, int | float]]:
    where = f"{path}:{node.lineno}: SHAPES"
    try:
        shapes = ast.literal_eval(node)
    except (ValueError, TypeError):
        raise ProblemError(f"{where} must be a literal list of dicts, e.g. [{{'batch_size': 8}}]") from None
    if not isinstance(shapes, list):
        raise ProblemError(f"{where} must be a list of dicts, not a {type(shapes).__name__}")
    if len(shapes) > MAX_SHAPES:
        raise ProblemError(f"{where} has {len(shapes)} entries; grade takes at most {MAX_SHAPES}")
    sizes = ", ".join(sorted(declared)) or "none"
    for index, shape in enumerate(shapes):
        if not isinstance(shape, dict) or not shape:
            raise ProblemError(f"{where}[{index}] must be a non-empty dict, not {shape!r}")
        for key, value in shape.items():
            if key not in declared:
                raise ProblemError(
                    f"{where}[{index}] key {key!r} is not a size of the problem: "
                    f"keys must be module-level names assigned a literal (here: {sizes})"
                )
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ProblemError(f"{where}[{index}] key {key!r}: the value must be an int or a float, not {value!r}")
    return shapes


def _sizes_block(shapes: list[dict[str, int | float]], declared: dict[str, Any]) -> str:
    # Each call starts from the declared sizes: a process builds every shape in turn, and the
    # shape None must not keep the previous shape's sizes.
    changed = sorted({key for shape in shapes for key in shape})
    return _ADAPTER_HEAD.format(init_seed=INIT_SEED, declared={key: declared[key] for key in changed})


def _join(*parts: str) -> str:
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts)


_KEEP_PROBLEM_INIT_INPUTS = """
# ---- kcoral grade: the problem's get_init_inputs builds ModelNew, as it builds Model ----
_kcoral_grade_get_init_inputs = get_init_inputs
"""

_ADAPTER_HEAD = """
# ---- kcoral grade adapter (kcoral/grading/kernelbench.py) ----
import torch as _kcoral_grade_torch

_KCORAL_GRADE_INIT_SEED = {init_seed}
_KCORAL_GRADE_DECLARED_SIZES = {declared!r}


def _kcoral_grade_apply_shape(shape):
    globals().update(_KCORAL_GRADE_DECLARED_SIZES)
    globals().update(shape or {{}})
"""

_MAKE_INPUTS = f"""

def {MAKE_INPUTS}(seed, shape):
    _kcoral_grade_apply_shape(shape)
    _kcoral_grade_torch.manual_seed(seed)
    return tuple(x.cuda() if isinstance(x, _kcoral_grade_torch.Tensor) else x for x in get_inputs())
"""

_MAKE_REFERENCE = f"""

def {MAKE_REFERENCE}(shape):
    _kcoral_grade_apply_shape(shape)
    _kcoral_grade_torch.manual_seed(_KCORAL_GRADE_INIT_SEED)
    return Model(*get_init_inputs()).cuda()
"""

_MAKE_CANDIDATE = f"""

def {MAKE_CANDIDATE}(shape):
    _kcoral_grade_apply_shape(shape)
    _kcoral_grade_torch.manual_seed(_KCORAL_GRADE_INIT_SEED)
    return ModelNew(*_kcoral_grade_get_init_inputs()).cuda()
"""
