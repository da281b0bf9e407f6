"""Issue 45, `kcoral mcp` (python/kcoral/mcp_tools/): an agent's session with the `mcp` client
library, over stdio and over streamable HTTP, against a real CPU server with keys. The tools are
listed; a C++ kernel with an error comes back with the compiler's line, the fixed one compiles
(with progress notifications) and evaluates correct and trusted on the host timer, with no GPU
lease; a candidate that sets a profile function is correct but not trusted, the defences' reason
quoted; over the key's CPU-seconds quota a call is a tool error carrying the 429's Retry-After.

KCORAL_MCP_TRANSCRIPT=FILE writes the stdio session's calls and answers there (docs/mcp.md's
transcript is one)."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import shutil

import anyio
import httpx
import pytest

mcp = pytest.importorskip("mcp", reason="needs the MCP SDK: pip install 'mcp~=2.3'")

from mcp import StdioServerParameters  # noqa: E402

from conftest import REPO, Server, free_port, wait_for  # noqa: E402

TOOLS = {"target", "compile", "evaluate", "run", "usage"}

BROKEN = """void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const float* in = static_cast<const float*>(x.data_ptr());
  float* out = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = in[i] + one;
}
"""
FIXED = BROKEN.replace("+ one;", "+ 1.0f;")
REFERENCE = "def reference(x):\n    return x + 1\n"
# A Python candidate that sets a profile function at import: the benchmark's defences flag it.
PROFILED = "import sys\nsys.setprofile(lambda *args: None)\n\ndef add_one(x):\n    return x + 1\n"
BUSY = "import time\ndef main(seconds):\n    end = time.process_time() + seconds\n    while time.process_time() < end:\n        pass\n    return seconds\n"  # fmt: skip


def new_key(tenant: str) -> tuple[str, str]:
    """`kcoral keys new TENANT`, as an operator makes them: the key and its line for --auth-keys."""
    made = subprocess.run([sys.executable, "-m", "kcoral", "keys", "new", tenant], capture_output=True, text=True, check=True)  # fmt: skip
    fields = dict(line.split(":", 1) for line in made.stdout.splitlines())
    return fields["key"].strip(), fields["line"].strip()


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mcp")
    agent, agent_line = new_key("agent")
    capped, capped_line = new_key("capped")
    path = tmp / "keys.txt"
    path.write_text(f"{agent_line}\n{capped_line}\nlimits capped cpu_seconds=0.3\n")
    server = Server(tmp, "--auth-keys", str(path), "--num-workers", "2", "--quota-window-seconds", "3600")
    yield server, {"agent": agent, "capped": capped}
    server.stop()


def mcp_environment(key: str) -> dict:
    # The repo's kcoral, the one under test (the SDK's stdio client passes only a few variables on).
    return {"KCORAL_API_KEY": key, "PYTHONPATH": str(REPO / "python")}


def answer(result) -> dict:
    """A tool's answer: its structured content, or the JSON of its error text."""
    if result.is_error:
        text = result.content[0].text  # "Error executing tool NAME: {...}"
        assert "{" in text, text  # an anticipated error is JSON; a crash is only its tool's name
        return json.loads(text[text.index("{") :])
    return result.structured_content


class Session:
    """Calls tools, keeping a transcript of them."""

    def __init__(self, client):
        self.client, self.transcript, self.progress = client, [], []

    async def call(self, tool: str, arguments: dict):
        async def progressed(progress, total, message):
            self.progress.append((tool, progress, message))

        result = await self.client.call_tool(tool, arguments, progress_callback=progressed)
        self.transcript.append({"call": tool, "arguments": arguments, "is_error": result.is_error, "answer": answer(result)})  # fmt: skip
        return result


async def agent_session(client) -> Session:
    session = Session(client)
    tools = await client.list_tools()
    assert {tool.name for tool in tools.tools} == TOOLS
    hints = {tool.name: tool.annotations.read_only_hint for tool in tools.tools}
    assert hints == {"target": True, "usage": True, "compile": False, "evaluate": False, "run": False}
    for tool in tools.tools:  # every argument is described for the agent
        for name, schema in tool.input_schema.get("properties", {}).items():
            assert schema.get("description"), f"{tool.name}.{name} has no description"

    target = answer(await session.call("target", {}))
    assert target["device"] == "cpu" and target["cpu_execution"] == "host" and "tvm_ffi" in target["versions"]

    broken = await session.call("compile", {"source": BROKEN, "functions": ["add_one"], "extra_cflags": ["-O2"]})
    assert broken.is_error
    refused = answer(broken)
    assert refused["field"] == "source" and refused["fix"]
    errors = [d for d in refused["diagnostics"] if d["severity"] == "error"]
    assert errors[0]["line"] == 4, refused  # the line in our source, not in the file build_inline wrote
    assert "'one' was not declared" in errors[0]["message"].replace("\u2018", "'").replace("\u2019", "'")
    assert (
        "kernel.cpp line 4" in refused["error"]
        and "kernel.cpp:4:" in refused["log"]
        and "main.cpp" not in refused["log"]
    )

    compiled = await session.call("compile", {"source": FIXED, "functions": ["add_one"], "extra_cflags": ["-O2"]})
    assert not compiled.is_error, compiled.content
    library = compiled.structured_content
    assert re.fullmatch(r"[0-9a-f]{64}", library["library_sha256"]) and library["bytes"] > 1000
    assert library["lease"]["gpu_ids"] == [] and library["lease"]["lease_held_ms"] == 0
    assert any(tool == "compile" for tool, _, _ in session.progress), "no progress notification"

    evaluated = await session.call(
        "evaluate",
        {
            "library_sha256": library["library_sha256"],
            "function": "add_one",
            "reference": REFERENCE,
            "inputs": [{"shape": [65536], "dtype": "float32", "fill": "randn", "seed": 1}],
            "outputs": [{"shape": [65536], "dtype": "float32"}],
            "warmup_ms": 5,
            "repeat_ms": 30,
        },
    )
    assert not evaluated.is_error, evaluated.content
    result = evaluated.structured_content
    assert result["correct"] is True and result["correctness"]["outputs"][0]["mismatched"] == 0
    timing = result["timing"]
    assert timing["timer"] == "host" and timing["median_ms"] > 0 and timing["samples"] > 1
    assert timing["p10_ms"] <= timing["median_ms"] <= timing["p90_ms"] and timing["spread"] >= 0
    assert result["integrity"]["trusted"] is True and result["integrity"]["reasons"] == []
    assert result["lease"]["gpu_ids"] == [] and result["lease"]["lease_held_ms"] == 0

    unknown = answer(await session.call("evaluate", {"library_sha256": "0" * 64, "function": "add_one", "reference": REFERENCE, "inputs": []}))  # fmt: skip
    assert unknown["field"] == "library_sha256" and "compile" in unknown["fix"]
    bad_dtype = answer(await session.call("evaluate", {"library_sha256": library["library_sha256"], "function": "add_one", "reference": REFERENCE, "inputs": [{"shape": [4], "dtype": "float33"}]}))  # fmt: skip
    assert bad_dtype["field"] == "inputs[0].dtype" and "float32" in bad_dtype["fix"]

    no_arch = answer(await session.call("compile", {"source": FIXED, "functions": ["add_one"], "language": "cuda"}))
    assert no_arch["field"] == "arch" and "sm_90a" in no_arch["fix"]  # a CPU server has no target arch to default to

    profiled = await session.call(
        "evaluate",
        {
            "module": PROFILED,
            "function": "add_one",
            "reference": REFERENCE,
            "inputs": [{"shape": [64], "dtype": "float32"}],
            "repeat_ms": 5,
        },
    )
    distrusted = profiled.structured_content
    assert distrusted["correct"] is True and distrusted["integrity"]["trusted"] is False  # right, but not trusted
    assert any("sys.setprofile" in reason for reason in distrusted["integrity"]["reasons"]), distrusted["integrity"]

    usage = answer(await session.call("usage", {}))
    assert usage["usage"]["tenant"] == "agent" and usage["usage"]["requests"] >= 1
    return session


def test_an_agent_session_over_stdio(keyed_server):
    server, keys = keyed_server
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "kcoral", "mcp", "--url", server.url], env=mcp_environment(keys["agent"])
    )

    async def main():
        async with mcp.Client(parameters) as client:
            return await agent_session(client)

    started = time.monotonic()
    session = anyio.run(main)
    assert time.monotonic() - started < 45
    if os.environ.get("KCORAL_MCP_TRANSCRIPT"):
        with open(os.environ["KCORAL_MCP_TRANSCRIPT"], "w") as out:
            json.dump({"transcript": session.transcript, "progress": session.progress}, out, indent=1)


# A kernel that names an undeclared `one` on its line 4 (the file begins with a blank line).
CUDA = (Path(__file__).parent / "data" / "add_one_unknown_name.cu").read_text()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_cuda_compiles_on_a_cpu_server_for_the_arch_asked(keyed_server):
    """The CPU half of the GPU flow: nvcc on a server with no GPU, for an arch given by name."""
    server, keys = keyed_server
    parameters = StdioServerParameters(
        command=sys.executable, args=["-m", "kcoral", "mcp", "--url", server.url], env=mcp_environment(keys["agent"])
    )
    arguments = {"functions": ["add_one"], "language": "cuda", "arch": "sm_90a"}

    async def main():
        async with mcp.Client(parameters) as client:
            broken = await client.call_tool("compile", {**arguments, "source": CUDA})
            fixed = await client.call_tool("compile", {**arguments, "source": CUDA.replace("+ one;", "+ 1.0f;")})
            return answer(broken), fixed

    refused, fixed = anyio.run(main)
    error = refused["diagnostics"][0]
    assert (error["file"], error["line"]) == ("kernel.cu", 4), refused  # nvcc's format, our source's line
    assert error["source_line"] == "  if (i < n) y[i] = x[i] + one;" and "kernel.cu(4): error" in refused["log"]
    assert not fixed.is_error, fixed.content
    assert fixed.structured_content["language"] == "cuda" and fixed.structured_content["lease"]["gpu_ids"] == []


@pytest.fixture
def mcp_over_http(keyed_server, tmp_path):
    """`kcoral mcp --http` with the capped key, on a loopback port; stopped by its pid."""
    server, keys = keyed_server
    port = free_port()
    log = open(tmp_path / "mcp.stderr", "wb")  # a file, not a pipe that nobody drains
    process = subprocess.Popen(
        [sys.executable, "-m", "kcoral", "mcp", "--url", server.url, "--http", f"127.0.0.1:{port}"],
        env={**os.environ, **mcp_environment(keys["capped"])},
        stdout=subprocess.DEVNULL,
        stderr=log,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/mcp"

    def listening():
        assert process.poll() is None, (tmp_path / "mcp.stderr").read_text()
        try:
            httpx.get(url, timeout=0.5)
            return True
        except httpx.TransportError:
            return False

    try:
        wait_for(listening, 20, "kcoral mcp --http to listen", every=0.1)
        yield url
    finally:  # stopped by its pid, whether or not it came up
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    log.close()


def test_over_http_a_spent_quota_is_a_tool_error_with_retry_after(mcp_over_http):
    busy = {
        "instructions": [
            {"op": "upload", "id": "m", "kind": "module", "source": BUSY},
            {"op": "get_function", "id": "f", "module": {"$ref": "m"}, "name": "main"},
            {"op": "run", "id": "r", "fn": {"$ref": "f"}, "args": [0.5]},
            {"op": "return", "key": "spent", "value": {"$ref": "r"}},
        ]
    }

    async def main():
        async with mcp.Client(mcp_over_http) as client:
            assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
            first = await client.call_tool("run", {"program": busy})  # overdraws the 0.3 s: never cut short
            assert not first.is_error and first.structured_content["status"] == "COMPLETED", first.content
            assert first.structured_content["results"] == {"spent": 0.5}
            for _ in range(2):  # a window that ended between two calls frees the key once more
                refused = await client.call_tool("run", {"program": busy})
                if refused.is_error:
                    return answer(refused)
            raise AssertionError("no call was refused over quota")

    refusal = anyio.run(main)
    if os.environ.get("KCORAL_MCP_TRANSCRIPT"):
        with open(os.environ["KCORAL_MCP_TRANSCRIPT"] + ".429.json", "w") as out:
            json.dump(refusal, out, indent=1, ensure_ascii=False)
    assert refusal["http_status"] == 429 and refusal["kind"] == "quota", refusal
    assert 0 < refusal["retry_after_seconds"] <= 3600 and "retry_after_seconds" in refusal["fix"]
    assert "cpu_seconds" in refusal["error"]
