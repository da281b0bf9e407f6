"""Issue 45's GPU half: an agent's session through `kcoral mcp` (stdio, the `mcp` client library)
against a real GPU server. A CUDA kernel with an error comes back at its line, the fixed one
compiles for the server's own arch, and evaluates correct and trusted on the GPU's timer with a
GPU lease. Two cheats pass the tool's one-shot correctness call: one that writes its output on
its first call only is answered correct but not trusted, with the defences' reasons; one that
skips its work once it has been probed is refused by the benchmark's output check, and the refusal
is a tool error that quotes its reason."""

import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest

mcp = pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'mcp~=2.3'")

from mcp import StdioServerParameters  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CUDA = (REPO / "tests" / "e2e" / "data" / "add_one_unknown_name.cu").read_text()  # its error on line 4
REFERENCE = "def reference(x):\n    return x + 1\n"
# Correct on its first call (the tool's correctness call), idle after: the benchmark's calls
# launch nothing and write nothing, so no output is found to check.
WRITES_ONCE = (
    "calls = 0\n\ndef add_one(x, y):\n    global calls\n    calls += 1\n    if calls == 1:\n        y.copy_(x + 1)\n"
)
# Honest while it may be probed (its first 16 calls), then it skips the work and touches one
# element: the benchmark's timed calls leave their poisoned output, which its check proves wrong.
SKIPS_AFTER_PROBES = """import torch

calls = 0

def add_one(x, y):
    global calls
    calls += 1
    if calls > 16:
        y[:1].add_(0.0)
        return
    torch.add(x, 1.0, out=y)
"""
TENSOR = {"shape": [1 << 20], "dtype": "float32", "fill": "randn", "seed": 3}


def answer(result) -> dict:
    if result.is_error:
        text = result.content[0].text
        assert "{" in text, text
        return json.loads(text[text.index("{") :])
    return result.structured_content


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_an_agent_compiles_and_evaluates_a_cuda_kernel_trusted_and_a_cheat_is_a_tool_error(gpu_server):
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kcoral", "mcp", "--url", gpu_server.url],
        # The repo's kcoral, and the SDK where it was installed (a GPU machine's carried wheels).
        env={"PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "python"), os.environ.get("PYTHONPATH")]))},
    )
    evaluate = {"function": "add_one", "reference": REFERENCE, "inputs": [TENSOR], "outputs": [{"shape": TENSOR["shape"], "dtype": "float32"}]}  # fmt: skip

    async def main():
        async with mcp.Client(parameters) as client:
            target = answer(await client.call_tool("target", {}))
            broken = await client.call_tool("compile", {"source": CUDA, "functions": ["add_one"], "language": "cuda"})
            fixed = await client.call_tool("compile", {"source": CUDA.replace("+ one;", "+ 1.0f;"), "functions": ["add_one"], "language": "cuda"})  # fmt: skip
            assert not fixed.is_error, fixed.content
            library = fixed.structured_content["library_sha256"]
            honest = await client.call_tool("evaluate", {"library_sha256": library, **evaluate})
            idle = await client.call_tool("evaluate", {"module": WRITES_ONCE, **evaluate})
            cheat = await client.call_tool("evaluate", {"module": SKIPS_AFTER_PROBES, **evaluate})
            return target, answer(broken), honest, idle, cheat

    target, refused, honest, idle, cheat = anyio.run(main)
    print("mcp-gpu target:", json.dumps(target)[:400])
    assert target["device"] == "gpu" and target["gpu_count"] >= 1 and target["target"]["arch"].startswith("sm_")
    error = refused["diagnostics"][0]
    assert (error["file"], error["line"]) == ("kernel.cu", 4), refused

    assert not honest.is_error, honest.content
    result = honest.structured_content
    print("mcp-gpu honest:", json.dumps({k: result[k] for k in ("timing", "integrity", "lease")})[:1200])
    assert result["correct"] is True and result["correctness"]["outputs"][0]["mismatched"] == 0
    assert result["timing"]["timer"] != "host" and result["timing"]["median_ms"] > 0
    assert result["integrity"]["trusted"] is True, result["integrity"]
    # The GPU's lease, held for the benchmark's timing span (gpu_ids come only with a gpu_count asked).
    assert result["lease"]["lease_held_ms"] > 0 and result["lease"]["timing_spans"]["count"] >= 1

    print("mcp-gpu writes once:", json.dumps(answer(idle)["integrity"])[:1200])
    assert not idle.is_error and idle.structured_content["correct"] is True  # the one call checked was right
    distrusted = idle.structured_content["integrity"]
    assert distrusted["trusted"] is False and any("no output found" in r for r in distrusted["reasons"]), distrusted

    print("mcp-gpu skips after probes:", json.dumps(answer(cheat))[:1200])
    assert cheat.is_error, cheat.structured_content
    refusal = answer(cheat)
    assert refusal["field"] == "function" and refusal["kind"] == "correctness", refusal
    assert "differ" in refusal["error"] and "reference call" in refusal["error"], refusal
