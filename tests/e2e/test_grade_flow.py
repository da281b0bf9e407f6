"""grade's three programs against a real (CPU) server: the flow runs, and a phase that cannot run
ends the grade with an error naming that phase. The phases' GPU work is tests/gpu/test_grade.py:
a CPU server's workers have no torch here, so the first phase stops at its import."""

import asyncio

import pytest

from kcoral import AsyncClient
from kcoral.grading import Code

CANDIDATE = Code("def kernel(x):\n    return x\n", "kernel")
REFERENCE = Code("def reference(x):\n    return x\n", "reference")
MAKE_INPUTS = Code("def make_inputs(seed, shape):\n    return (seed,)\n", "make_inputs")


def test_a_grade_that_cannot_draw_its_inputs_names_that_phase(client):
    verdict = client.grade(CANDIDATE, REFERENCE, MAKE_INPUTS, {"shapes": [{"n": 4}]}, timeout_seconds=60)
    assert verdict["error"]["phase"] == "inputs", verdict
    assert verdict["error"]["message"]  # no torch here; a CPU server with torch has no CUDA
    assert not verdict["correct"] and not verdict["trusted"] and verdict["speedup"] is None
    assert verdict["reasons"][0].startswith("make_inputs or the reference failed")


def test_the_async_client_drives_the_same_flow(shared_server):
    async def grade() -> dict:
        async with AsyncClient(shared_server.url) as client:
            return await client.grade(CANDIDATE, REFERENCE, MAKE_INPUTS, timeout_seconds=60)

    assert asyncio.run(grade())["error"]["phase"] == "inputs"


def test_bad_cfg_is_refused_before_anything_runs(client):
    with pytest.raises(ValueError, match="cfg\\['seeds'\\]"):
        client.grade(CANDIDATE, REFERENCE, MAKE_INPUTS, {"seeds": 99})
