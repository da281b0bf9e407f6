"""The three phases of `grade` (issue 42, docs/grading.md), each run by a worker of its own.

    draw_inputs   (a reference worker)  draws the input sets from seeds it never reveals
    answer        (the candidate's)     runs the candidate on them, times it beside the reference
    judge         (a second reference)  recomputes the reference and compares

The candidate's process never holds a reference output or a seed: it gets the input sets as bytes,
and what it answers travels back as bytes, read with torch's weights-only loader (tensors and
plain containers, no code). The judge runs no candidate code, so what it says is out of the
candidate's reach. Torch is imported inside the phases: this module imports on any server.

The bytes are made and read by host-only steps (pack_inputs, unpack_sets, pack_answers,
unpack_for_judge), which the programs run as cpu_only functions: off the GPU lease.
"""

import copy
import hashlib
import io
import secrets
import time

from kcoral.errors import ExecutionError

DISTRIBUTIONS = ("normal", "uniform", "large")
# Draws of one set before it is reported unusable: two of its distribution, then normal values.
_DRAWS = 3
_LARGE_SCALE = 64.0
# The poison handed to the candidate's fresh allocations (all bits set: NaN, -1).
_POISON_BYTES_MAX = 256 << 20


class _Laps:
    """Where a phase's time went, in ms per step (returned as `steps_ms`: bench/grade_lease.py)."""

    def __init__(self):
        self.ms: dict[str, float] = {}
        self._last = time.perf_counter()

    def __call__(self, step: str) -> None:
        now = time.perf_counter()
        self.ms[step] = round(self.ms.get(step, 0.0) + (now - self._last) * 1000, 3)
        self._last = now


def _torch():
    import torch

    return torch


def _save(value) -> bytes:
    buffer = io.BytesIO()
    _torch().save(value, buffer)
    return buffer.getvalue()


def _load(data: bytes, what: str):
    try:
        return _torch().load(io.BytesIO(bytes(data)), weights_only=True, map_location="cpu")
    except Exception as exc:  # noqa: BLE001 - bytes from another process: any failure is theirs
        raise ExecutionError("runtime", f"{what} could not be read: {type(exc).__name__}: {exc}"[:400]) from None


def shapes_of(plan: dict) -> list:
    """None (the declared sizes) first, then each shape of cfg `shapes`."""
    return [None, *plan.get("shapes", [])]


class _Callables:
    """A plan's callable per shape: the function itself, or what its factory makes for the shape
    (made once per shape and process)."""

    def __init__(self, fn, factory: bool):
        self.fn, self.factory, self.made = fn, factory, {}

    def __call__(self, shape):
        if not self.factory:
            return self.fn
        key = repr(sorted(shape.items())) if shape else ""
        if key not in self.made:
            self.made[key] = self.fn(shape)
        return self.made[key]


def _tensors_to(value, device):
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value.detach().to(device).clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_tensors_to(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _tensors_to(v, device) for k, v in value.items()}
    return value


def _as_tuple(inputs) -> tuple:
    return tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)


def _redistributed(inputs: tuple, distribution: str, seed: int) -> tuple:
    """Floating tensors' values from `distribution`, within the range make_inputs drew (so a
    positive input stays positive): normal keeps its values, uniform spreads them evenly over
    that range, large multiplies them by 64."""
    torch = _torch()
    if distribution == "normal":
        return inputs
    generator = torch.Generator(device="cuda").manual_seed(seed)
    changed = []
    for value in inputs:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel() > 0:
            if distribution == "large":
                value = value * _LARGE_SCALE
            else:
                low, high = value.min(), value.max()
                uniform = torch.rand(value.shape, generator=generator, device=value.device, dtype=torch.float32)
                value = (low + (high - low) * uniform).to(value.dtype)
        changed.append(value)
    return tuple(changed)


def _in_reference_dtype(fn, inputs: tuple, plan: dict):
    """fn and inputs as the reference runs them: float64 when cfg reference_dtype asks."""
    if plan.get("reference_dtype") != "float64":
        return fn, inputs
    torch = _torch()
    if isinstance(fn, torch.nn.Module):
        fn = copy.deepcopy(fn).double()  # the module itself stays as timed
    inputs = tuple(v.double() if isinstance(v, torch.Tensor) and v.is_floating_point() else v for v in inputs)
    return fn, inputs


def _call_reference(fn, inputs: tuple, plan: dict):
    torch = _torch()
    fn, inputs = _in_reference_dtype(fn, _tensors_to(inputs, "cuda"), plan)
    with torch.no_grad():
        outputs = fn(*inputs)
    torch.cuda.synchronize()
    return outputs


def _leaves(value, path: str = "return") -> list:
    """(path, tensor or other) for every leaf of a returned structure."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (tuple, list)):
        return [leaf for i, v in enumerate(value) for leaf in _leaves(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{path}[{k!r}]")]
    return [(path, value)]


def _all_finite(outputs) -> bool:
    torch = _torch()
    return all(
        bool(torch.isfinite(v).all())
        for _, v in _leaves(outputs)
        if isinstance(v, torch.Tensor) and v.is_floating_point()
    )


# -- phase 1: the input sets ------------------------------------------------------------------


def draw_inputs(reference, make_inputs, plan: dict) -> dict:
    """Input sets for every shape, `plan["seeds"]` each, from seeds drawn here and never returned.
    A set on which the reference gives non-finite values is unusable and drawn again."""
    torch = _torch()
    lap = _Laps()
    references = _Callables(reference, plan.get("reference_factory", False))
    sets, unusable = [], []
    for shape_index, shape in enumerate(shapes_of(plan)):
        for seed_index in range(plan["seeds"]):
            # Rotating over shapes too: two sets per shape still see all three distributions.
            wanted = DISTRIBUTIONS[(shape_index + seed_index) % len(DISTRIBUTIONS)]
            for draw in range(_DRAWS):
                distribution = wanted if draw < _DRAWS - 1 else "normal"
                seed = secrets.randbits(62)
                torch.manual_seed(seed)
                inputs = _as_tuple(_tensors_to(_as_tuple(make_inputs(seed, shape)), "cuda"))
                inputs = _redistributed(inputs, distribution, seed)
                lap("make_inputs")
                usable = _all_finite(_call_reference(references(shape), inputs, plan))
                lap("reference")
                if usable:
                    break
                unusable.append({"shape": shape, "seed_index": seed_index, "distribution": distribution})
            else:
                raise ExecutionError(
                    "runtime",
                    f"grade: the reference gave non-finite values on {_DRAWS} draws for shape {shape!r}"
                    f" (seed {seed_index}): no usable input set",
                )
            sets.append(
                {
                    "shape": shape,
                    "seed_index": seed_index,
                    "distribution": distribution,
                    "inputs": list(_tensors_to(inputs, "cpu")),
                }
            )
            lap("to_host")
    return {"sets": sets, "unusable": unusable, "steps_ms": lap.ms}


def pack_inputs(drawn: dict) -> dict:
    """The drawn sets as bytes for the other two workers (a cpu_only step: off the lease)."""
    lap = _Laps()
    packed = _save(drawn["sets"])
    lap("save")
    return {**drawn, "sets": packed, "steps_ms": {**drawn["steps_ms"], **lap.ms}}


def unpack_sets(data: bytes) -> list:
    """The input sets, read back on the host (a cpu_only step: off the lease)."""
    return _load(data, "the input sets")


# -- phase 2: the candidate's answers and its timing ------------------------------------------


def _poison_fresh_allocations(nbytes: int) -> None:
    """Fills the caching allocator's free blocks with poison: a fresh output the call does not
    write holds NaN or -1, never a freed answer."""
    torch = _torch()
    size = min(max(nbytes * 2, 1 << 20), _POISON_BYTES_MAX)
    torch.empty(size, dtype=torch.uint8, device="cuda").fill_(0xFF)  # freed at once, kept cached


def _digest(value) -> str | None:
    """A tensor's dtype, shape and bytes, hashed (None for anything else): the judge compares
    the candidate's inputs after its call with the set it holds without another copy's traffic."""
    torch = _torch()
    if not isinstance(value, torch.Tensor):
        return None
    data = value.detach().contiguous().reshape(-1).view(torch.uint8).cpu().numpy().tobytes()
    return f"{value.dtype}:{list(value.shape)}:{hashlib.sha256(data).hexdigest()}"


def _answer_of(value):
    """What the candidate returned, as plain tensors on the host (anything else as its type)."""
    torch = _torch()
    if isinstance(value, torch.Tensor):
        return value.detach().as_subclass(torch.Tensor).contiguous().cpu().clone()
    if isinstance(value, (tuple, list)):
        return [_answer_of(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _answer_of(v) for k, v in value.items()}
    return {"not_a_tensor": type(value).__name__}


def answer(candidate, reference, sets: list, plan: dict) -> dict:
    """The candidate on every input set (its outputs, and its inputs after the call, on the
    host for the judge), then the defended paired benchmark against the reference on the
    declared sizes."""
    torch = _torch()
    from kcoral._worker import gpu_benchmark

    lap = _Laps()
    candidates = _Callables(candidate, plan.get("candidate_factory", False))
    references = _Callables(reference, plan.get("reference_factory", False))
    answers = []
    for entry in sets:
        inputs = _as_tuple(_tensors_to(tuple(entry["inputs"]), "cuda"))
        nbytes = sum(v.numel() * v.element_size() for v in inputs if isinstance(v, torch.Tensor))
        lap("to_device")
        try:
            fn = candidates(entry["shape"])
            _poison_fresh_allocations(nbytes)
            outputs = fn(*inputs)
            torch.cuda.synchronize()
            lap("candidate")
            answers.append({"outputs": _answer_of(outputs), "inputs_after": [_answer_of(v) for v in inputs]})
            lap("to_host")
        except Exception as exc:  # noqa: BLE001 - the candidate's own failure, reported per set
            answers.append({"error": f"{type(exc).__name__}: {exc}"[:300]})
    declared = _as_tuple(_tensors_to(tuple(sets[0]["inputs"]), "cuda"))
    try:
        timing = gpu_benchmark.benchmark_paired(candidates(None), references(None), declared, plan.get("benchmark", {}))
    except ExecutionError as error:  # the answers still go to the judge; the verdict says why
        timing = {"error": {"kind": error.kind, "message": error.message[:400]}}
    except Exception as exc:  # noqa: BLE001 - the candidate (or its factory) raised
        timing = {"error": {"kind": "runtime", "message": f"{type(exc).__name__}: {exc}"[:400]}}
    lap("benchmark_paired")
    return {"answers": answers, "timing": timing, "steps_ms": lap.ms}


def pack_answers(answered: dict) -> dict:
    """Each input after the call as its digest, and the answers as bytes for the judge (a
    cpu_only step: off the lease)."""
    lap = _Laps()
    for entry in answered["answers"]:
        if "inputs_after" in entry:
            entry["inputs_after"] = [_digest(v) for v in entry["inputs_after"]]
    lap("digest")
    packed = _save(answered["answers"])
    lap("save")
    return {**answered, "answers": packed, "steps_ms": {**answered["steps_ms"], **lap.ms}}


# -- phase 3: the judgement --------------------------------------------------------------------

# (rtol, atol) per dtype the candidate claims, KernelBench's 1e-2 by default. Under a float64
# reference an fp32 claim means fp32 arithmetic: bf16 (and TF32) work fails it. On inputs where
# the claimed dtype's own arithmetic strays (softmax over logits in the thousands), the reference
# run in that dtype shows how far: a candidate may stray up to _OWN_ERROR_FACTOR times as far.
_OWN_ERROR_FACTOR = 8.0
_TOLERANCE = {"float64": (1e-7, 1e-7), "default": (1e-2, 1e-2)}
_TOLERANCE_UNDER_FLOAT64 = {"float32": (1e-4, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 2e-2)}


def _tolerance(claimed: str, plan: dict) -> tuple[float, float]:
    if "tolerance" in plan:
        return plan["tolerance"]["rtol"], plan["tolerance"]["atol"]
    if plan.get("reference_dtype") == "float64" and claimed in _TOLERANCE_UNDER_FLOAT64:
        return _TOLERANCE_UNDER_FLOAT64[claimed]
    return _TOLERANCE.get(claimed, _TOLERANCE["default"])


def _compare(expected, got, plan: dict, native=None) -> dict:
    """Per output: same paths, shapes and (but for a float64 reference) dtypes, then every element
    within atol + rtol * |expected|. Under a float64 reference atol is scaled by the output's RMS,
    and `native` (the reference in its own dtype) adds its own largest error where the candidate
    claims that dtype. A non-finite expected value never matches."""
    torch = _torch()
    expected_leaves, got_leaves = _leaves(expected), _leaves(got)
    native_leaves = dict(_leaves(native)) if native is not None else {}
    if [p for p, _ in expected_leaves] != [p for p, _ in got_leaves]:
        return {"correct": False, "why": "returned " + ", ".join(p for p, _ in got_leaves) + " where the reference returned " + ", ".join(p for p, _ in expected_leaves)}  # fmt: skip
    max_abs, max_rel, wrong = 0.0, 0.0, []
    for (path, e), (_, g) in zip(expected_leaves, got_leaves):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor):
            return {"correct": False, "why": f"{path}: not a tensor ({g.get('not_a_tensor', type(g).__name__)})"}
        if tuple(g.shape) != tuple(e.shape):
            return {"correct": False, "why": f"{path}: shape {list(g.shape)} where the reference gave {list(e.shape)}"}
        claimed = str(g.dtype).removeprefix("torch.")
        if plan.get("reference_dtype") != "float64" and g.dtype != e.dtype:
            return {"correct": False, "why": f"{path}: dtype {claimed} where the reference gave {e.dtype}"}
        e64, g64 = e.to("cuda", torch.float64), g.to("cuda", torch.float64)
        rtol, atol = _tolerance(claimed, plan)
        if plan.get("reference_dtype") == "float64" and "tolerance" not in plan and e64.numel():
            atol *= max(float(e64[torch.isfinite(e64)].pow(2).mean().sqrt()) if bool(torch.isfinite(e64).any()) else 1.0, 1e-30)  # fmt: skip
        own = native_leaves.get(path)
        if isinstance(own, torch.Tensor) and own.dtype == g.dtype and own.shape == e64.shape:
            strayed = (own.to(torch.float64) - e64).abs()
            strayed = strayed[torch.isfinite(strayed)]
            if strayed.numel():
                atol += _OWN_ERROR_FACTOR * float(strayed.max())
        difference = (g64 - e64).abs()
        bad = ~(difference <= atol + rtol * e64.abs()) | ~torch.isfinite(e64)
        finite = torch.isfinite(difference)
        if bool(finite.any()):
            max_abs = max(max_abs, float(difference[finite].max()))
            relative = difference[finite] / e64.abs()[finite].clamp_min(1e-30)
            max_rel = max(max_rel, float(relative.max()))
        if int(bad.sum()):
            wrong.append(f"{path}: {int(bad.sum())} of {e64.numel()} elements beyond rtol {rtol:g}, atol {atol:.3g}")
    result = {"correct": not wrong, "max_abs_err": max_abs, "max_rel_err": max_rel}
    if wrong:
        result["why"] = "; ".join(wrong)
    return result


def unpack_for_judge(input_sets: bytes, answers: bytes) -> dict:
    """The sets with each input's digest, and the candidate's answers, read on the host (a
    cpu_only step: off the lease)."""
    lap = _Laps()
    sets = _load(input_sets, "the input sets")
    got = _load(answers, "the candidate's answers")
    lap("load")
    for entry in sets:
        entry["digests"] = [_digest(v) for v in entry["inputs"]]
    lap("digest")
    return {"sets": sets, "answers": got, "steps_ms": lap.ms}


def judge(reference, unpacked: dict, plan: dict) -> dict:
    """Each set's reference recomputed here, the candidate's answer compared with it, its inputs
    compared with the set's; then the reference alone timed by the defended benchmark, which
    the paired timing's reference must agree with."""
    from kcoral._worker import gpu_benchmark

    lap = _Laps()
    references = _Callables(reference, plan.get("reference_factory", False))
    sets, got = unpacked["sets"], unpacked["answers"]
    if not isinstance(got, list) or len(got) != len(sets):
        got = [{"error": "the candidate's answers do not match the input sets"}] * len(sets)
    per_input = []
    for entry, answered in zip(sets, got):
        row = {
            "shape": entry["shape"],
            "seed_index": entry["seed_index"],
            "distribution": entry["distribution"],
            "correct": False,
            "max_abs_err": None,
            "max_rel_err": None,
        }
        if not isinstance(answered, dict) or "error" in answered or "outputs" not in answered:
            row["why"] = "the candidate raised: " + str(answered.get("error", "no answer"))[:300] if isinstance(answered, dict) else "no answer"  # fmt: skip
            per_input.append(row)
            continue
        fn, inputs = references(entry["shape"]), tuple(entry["inputs"])
        expected = _call_reference(fn, inputs, plan)
        native = _call_reference(fn, inputs, {}) if plan.get("reference_dtype") == "float64" else None
        lap("reference")
        row.update(_compare(expected, answered["outputs"], plan, native))
        lap("compare")
        changed = _changed_inputs(entry["digests"], answered.get("inputs_after"))
        if changed:
            row["correct"] = False
            row["why"] = "; ".join(filter(None, [row.get("why"), changed]))
        per_input.append(row)
    declared = _as_tuple(_tensors_to(tuple(sets[0]["inputs"]), "cuda"))
    timing = gpu_benchmark.benchmark(references(None), declared, plan.get("benchmark", {}))
    lap("benchmark")
    return {"per_input": per_input, "reference_timing": timing, "steps_ms": {**unpacked["steps_ms"], **lap.ms}}


def _changed_inputs(before: list, after) -> str:
    if not isinstance(after, list) or len(after) != len(before):
        return "its inputs after the call could not be compared"
    changed = [str(i) for i, (b, a) in enumerate(zip(before, after)) if b != a]
    return f"the call changed its input {', '.join(changed)}" if changed else ""
