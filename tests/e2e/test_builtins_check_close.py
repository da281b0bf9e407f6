"""kcoral.builtins.check_close / assert_close (spec/benchmark.md §2.3, §10; issue 9), called
in this process on numpy arrays (and torch tensors where torch is installed).

Needs kcoral._native, which is built wherever the CUDA toolkit is (no GPU needed for host
arrays); the CUDA cases run only where torch sees a GPU.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

_native = pytest.importorskip("kcoral._native", reason="kcoral._native is not built here")

from kcoral import builtins  # noqa: E402
from kcoral.errors import ExecutionError  # noqa: E402

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_cuda = pytest.mark.skipif(torch is None or not torch.cuda.is_available(), reason="no CUDA GPU")

KEYS = {
    "passed",
    "max_abs_err",
    "max_rel_err",
    "mismatched",
    "total",
    "nonfinite_actual",
    "nonfinite_expected",
    "rtol",
    "atol",
    "first_mismatch",
    "reason",
}


def run_python(source: str) -> dict:
    """Runs `source` in a fresh interpreter on this checkout; its last stdout line is JSON."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_equal_arrays_pass_with_the_default_tolerances():
    a = np.linspace(-1, 1, 1000, dtype=np.float32)
    result = builtins.check_close(a, a.copy())
    assert set(result) == KEYS
    assert result["passed"] and result["reason"] is None and result["first_mismatch"] is None
    assert (result["rtol"], result["atol"], result["total"]) == (1e-2, 1e-3, 1000)
    assert builtins.assert_close(a, a.copy()) == result


def test_mismatches_are_counted_and_located():
    expected = np.zeros((4, 8), dtype=np.float32)
    actual = expected.copy()
    actual[1, 2] = 0.5
    actual[3, 7] = -0.25
    result = builtins.check_close(actual, expected, {"atol": 0.1, "rtol": 0})
    assert not result["passed"]
    assert result["mismatched"] == 2 and result["total"] == 32
    assert result["first_mismatch"] == [1, 2]
    assert result["max_abs_err"] == 0.5
    assert result["max_rel_err"] == 0.0  # expected is 0 everywhere: no relative error
    with pytest.raises(ExecutionError) as raised:
        builtins.assert_close(actual, expected, {"atol": 0.1, "rtol": 0})
    assert raised.value.kind == "correctness"
    assert raised.value.message == (
        "outputs differ: max_abs_err=0.5, max_rel_err=0 exceed atol=0.1, rtol=0: "
        "2 of 32 elements differ (first at [1, 2])"
    )


def test_tolerance_is_atol_plus_rtol_times_expected():
    expected = np.array([100.0, 100.0])
    # bound = 1 + 0.01 * 100 = 2: 102 passes, 102.5 does not
    assert builtins.check_close(np.array([102.0, 98.0]), expected, {"rtol": 0.01, "atol": 1})["passed"]
    assert not builtins.check_close(np.array([102.5, 100.0]), expected, {"rtol": 0.01, "atol": 1})["passed"]


def test_nan_and_inf_are_counted_and_statistics_stay_finite():
    actual = np.array([np.nan, np.nan, np.inf, 1.0, 2.0], dtype=np.float32)
    expected = np.array([np.nan, 1.0, np.inf, np.inf, 2.5], dtype=np.float32)
    result = builtins.check_close(actual, expected, {"atol": 1})
    # NaN-NaN and inf-inf agree; NaN vs 1 and 1 vs inf do not; 2 vs 2.5 is within atol.
    assert result["mismatched"] == 2 and result["first_mismatch"] == [1]
    assert (result["nonfinite_actual"], result["nonfinite_expected"]) == (3, 3)
    assert result["max_abs_err"] == 0.5
    json.dumps(result, allow_nan=False)  # §10.4: never a NaN statistic
    with pytest.raises(ExecutionError, match=r"non-finite values: 3 in actual, 3 in expected"):
        builtins.assert_close(actual, expected, {"atol": 1})


def test_shapes_must_match_exactly_without_broadcasting():
    # torch.allclose broadcasts a [1] against [4] and "passes" (spec §2.3 gap).
    result = builtins.check_close(np.ones(1, np.float32), np.ones(4, np.float32))
    assert not result["passed"]
    assert result["reason"] == "shape mismatch: actual [1] vs expected [4]"
    assert result["total"] == 0
    with pytest.raises(ExecutionError) as raised:
        builtins.assert_close(np.ones((2, 3), np.float32), np.ones((3, 2), np.float32))
    assert raised.value.kind == "correctness"
    assert raised.value.message == "outputs differ: shape mismatch: actual [2, 3] vs expected [3, 2]"


def test_dtypes_must_match_exactly():
    with pytest.raises(
        ExecutionError, match=r"^correctness: outputs differ: dtype mismatch: actual float32 vs " r"expected float64$"
    ):
        builtins.assert_close(np.ones(3, np.float32), np.ones(3, np.float64))


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64, np.uint8, np.bool_]
)
def test_every_supported_numpy_dtype(dtype):
    expected = (np.arange(12) % 2).astype(dtype).reshape(3, 4)
    assert builtins.check_close(expected, expected.copy(), {"rtol": 0, "atol": 0})["passed"]
    actual = expected.copy()
    actual[2, 1] = 1 - actual[2, 1] if dtype is not np.bool_ else not actual[2, 1]
    result = builtins.check_close(actual, expected, {"rtol": 0, "atol": 0})
    assert (result["mismatched"], result["first_mismatch"], result["max_abs_err"]) == (1, [2, 1], 1.0)


def test_int64_is_compared_exactly():
    big = 2**53
    result = builtins.check_close(np.array([big + 1], np.int64), np.array([big], np.int64), {"rtol": 0, "atol": 0})
    assert not result["passed"] and result["max_abs_err"] == 1.0


def test_strided_and_read_only_arrays():
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in (base.T, base[::2, 1::2], base[:, ::-1]):
        assert builtins.check_close(view, np.ascontiguousarray(view), {"rtol": 0, "atol": 0})["passed"]
    frozen = base.copy()
    frozen.flags.writeable = False
    assert builtins.check_close(frozen, base, {"rtol": 0, "atol": 0})["passed"]


def test_empty_and_zero_dimensional_arrays():
    assert builtins.check_close(np.zeros((0, 5), np.float32), np.zeros((0, 5), np.float32))["passed"]
    result = builtins.check_close(np.array(1.0), np.array(2.0))
    assert result["total"] == 1 and result["first_mismatch"] == []


def test_chunks_do_not_change_the_answer():
    # 5 Mi float32 per side is 20 MiB: more than one 16 MiB chunk.
    expected = np.zeros(5 << 20, np.float32)
    actual = expected.copy()
    actual[[7, (4 << 20) + 3, (5 << 20) - 1]] = 1
    result = builtins.check_close(actual, expected, {"rtol": 0, "atol": 0})
    assert result["mismatched"] == 3 and result["first_mismatch"] == [7]


@pytest.mark.parametrize(
    "cfg, message",
    [
        ("tight", "must be a dict"),
        ({"rtl": 0.1}, "unknown keys ['rtl']"),
        ({"rtol": -1}, "'rtol' must be a finite number >= 0"),
        ({"atol": float("nan")}, "'atol' must be a finite number >= 0"),
        ({"atol": True}, "'atol' must be a finite number >= 0"),
    ],
)
def test_bad_cfg_is_a_runtime_error(cfg, message):
    with pytest.raises(ExecutionError) as raised:
        builtins.check_close(np.ones(2), np.ones(2), cfg)
    assert raised.value.kind == "runtime" and message in raised.value.message


def test_what_cannot_be_read_is_a_runtime_error():
    with pytest.raises(ExecutionError, match=r"actual is a list, which check_close cannot read"):
        builtins.check_close([1.0, 2.0], np.ones(2))
    with pytest.raises(ExecutionError, match=r"runtime: check_close: actual: unsupported dtype"):
        builtins.check_close(np.ones(2, np.complex64), np.ones(2, np.complex64))

    class Sneaky(np.ndarray):  # a mutable subclass could answer __dlpack__ with anything
        pass

    with pytest.raises(ExecutionError, match=r"expected is a Sneaky"):
        builtins.check_close(np.ones(2), np.ones(2).view(Sneaky))


def test_rebinding_names_after_import_does_not_reach_the_checker(monkeypatch):
    actual, expected = np.ones(3, np.float32), np.zeros(3, np.float32)
    monkeypatch.setattr(_native, "check_close", lambda *args: {"passed": True})
    # kcoral.builtins refuses attribute assignment; its __dict__ is still writable.
    monkeypatch.setitem(vars(builtins), "check_close", lambda *args, **kwargs: {"passed": True})
    with pytest.raises(ExecutionError, match="3 of 3 elements differ"):
        builtins.assert_close(actual, expected)


def test_exporters_bind_once_and_are_used_for_their_type():
    # A stand-in for torch: instances of the bound type are exported by the bound function only.
    out = run_python("""
        import json
        import numpy as np
        from kcoral import _native
        class Tensor:  # a mutable type: without binding, check_close refuses it
            def __init__(self, array): self.array = array
            def __dlpack__(self, **kwargs): raise AssertionError("looked up on the object")
        def to_dlpack(tensor): return tensor.array.__dlpack__()
        refused = ""
        try:
            _native.check_close(Tensor(np.ones(2)), np.ones(2), 0.0, 0.0)
        except TypeError as error:
            refused = str(error)
        _native.bind_exporters(Tensor, to_dlpack)
        passed = _native.check_close(Tensor(np.ones(2)), np.ones(2), 0.0, 0.0)["passed"]
        try:
            _native.bind_exporters(Tensor, lambda tensor: np.zeros(2).__dlpack__())
            second = "accepted"
        except RuntimeError as error:
            second = str(error)
        print(json.dumps({"refused": refused, "passed": passed, "second": second,
                          "bound": _native.exporters_bound()}))
    """)
    assert "Tensor, which check_close cannot read" in out["refused"]
    assert out["passed"] is True
    assert out["second"] == "the exporters are already bound"
    assert out["bound"] is True


def test_builtins_import_without_native_and_say_unavailable():
    out = run_python("""
        import json, sys
        sys.modules["kcoral._native"] = None  # what a server without the CUDA build sees
        from kcoral import builtins
        from kcoral.errors import ExecutionError
        try:
            builtins.check_close([1], [1])
        except ExecutionError as error:
            print(json.dumps({"kind": error.kind, "message": error.message}))
    """)
    assert out["kind"] == "unavailable"
    assert "check_close needs kcoral._native" in out["message"]


# ---------------------------------------------------------------- torch (the GPU server's case)
@needs_torch
def test_torch_cpu_tensors_including_bfloat16():
    a = torch.randn(64, 33)
    assert builtins.check_close(a, a.clone())["passed"]
    assert builtins.check_close(a.t(), a.t().contiguous(), {"rtol": 0, "atol": 0})["passed"]
    b = a.to(torch.bfloat16)
    wrong = b.clone()
    wrong[5, 6] += 1
    result = builtins.check_close(wrong, b)
    assert result["mismatched"] == 1 and result["first_mismatch"] == [5, 6]
    assert builtins.check_close(a.requires_grad_(), a.detach().clone())["passed"]


@needs_torch
def test_torch_dtype_mismatch_and_patched_exporters(monkeypatch):
    with pytest.raises(ExecutionError, match="dtype mismatch: actual float16 vs expected float32"):
        builtins.assert_close(torch.ones(2, dtype=torch.float16), torch.ones(2))
    honest = torch.zeros(3)
    monkeypatch.setattr(torch.Tensor, "__dlpack__", lambda self, *a, **k: torch.ones(3).__dlpack__())
    monkeypatch.setattr(torch.utils.dlpack, "to_dlpack", lambda t: torch._C._to_dlpack(torch.ones(3)))
    with pytest.raises(ExecutionError, match="3 of 3 elements differ"):
        builtins.assert_close(torch.ones(3), honest)


@needs_cuda
def test_torch_cuda_tensors_against_a_cpu_reference():
    y = torch.randn(1 << 20, device="cuda")
    assert builtins.check_close(y, y.cpu())["passed"]
    z = y.clone()
    z[12345] += 1
    result = builtins.check_close(z, y)
    assert result["mismatched"] == 1 and result["first_mismatch"] == [12345]
    with pytest.raises(ExecutionError, match=r"non-contiguous CUDA tensor.*contiguous\(\)"):
        builtins.check_close(y.view(1024, 1024).t(), y.view(1024, 1024).t().contiguous())
