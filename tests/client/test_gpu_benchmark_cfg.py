"""The GPU benchmark's cfg keys of issue 40, checked before anything reaches the GPU (the checks
run in the worker's Python, kcoral._worker.gpu_benchmark, on any machine): `unverifiable` names
returned paths or arguments, `constants` returned paths, and a malformed name is refused with
the key and the name in the message."""

import pytest

from kcoral._worker import gpu_benchmark
from kcoral.errors import ExecutionError


def test_declared_names_reach_the_native_benchmark_as_given():
    options = gpu_benchmark._options(
        {"unverifiable": ["return", "return[1]", "return['logits']", "arg:2"], "constants": ["return.scale"]}
    )
    assert options["unverifiable"] == ["return", "return[1]", "return['logits']", "arg:2"]
    assert options["constants"] == ["return.scale"]


def test_names_default_to_none_declared():
    options = gpu_benchmark._options({})
    assert options["unverifiable"] == [] and options["constants"] == []


@pytest.mark.parametrize(
    ("cfg", "words"),
    [
        ({"unverifiable": "return"}, ["'unverifiable'", "must be a list"]),
        ({"unverifiable": ["retur"]}, ["'unverifiable'", "'retur'", "arg:N"]),
        ({"unverifiable": ["return[x]"]}, ["'return[x]'"]),
        ({"constants": ["arg:1"]}, ["'constants'", "'arg:1'", "returned path"]),
        ({"constants": [3]}, ["'constants'", "must be a list"]),
    ],
)
def test_a_malformed_name_is_refused_naming_the_key_and_the_name(cfg, words):
    with pytest.raises(ExecutionError) as raised:
        gpu_benchmark._options(cfg)
    assert raised.value.kind == "runtime"
    for word in words:
        assert word in str(raised.value), str(raised.value)
