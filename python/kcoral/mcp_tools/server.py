"""The MCP server: five tools over one kcoral.Client (target, compile, evaluate, run, usage).

Every tool is a call of the HTTP API through kcoral.Client, so keys, quotas and the benchmark's
defences hold exactly as for any client. The client blocks; each call runs on a worker thread
while this loop sends a progress notification every second (when the caller asked for progress),
so an agent sees a long compile or benchmark advance instead of a silent wait."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from kcoral.client import Client
from kcoral.errors import KCoralError, ProtocolError, TransportError

from . import answers, programs
from .libraries import Libraries
from .tool_errors import from_client_error, tool_error
from .wire_program import program_from_json

T = TypeVar("T")
PROGRESS_EVERY_SECONDS = 1.0
TIMEOUT_HELP = "server-side limit in seconds; default kcoral mcp's --timeout-seconds, else the server's"
# Hints for an agent's confirmations: target and usage only read; the others spend the key's quota.
READS = ToolAnnotations(read_only_hint=True, open_world_hint=True)
SPENDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

INSTRUCTIONS = """KCoral compiles and times GPU (and CPU) kernels on a remote service.
Typical loop: `target` (what the service offers), `compile` (C++/CUDA source -> library_sha256, or
the compiler's errors with line numbers), `evaluate` (library_sha256 + a Python reference + input
specs -> correct?, median time with its spread, integrity.trusted and its reasons), repeat.
`run` sends any program in the protocol's JSON; `usage` shows this key's quota. Errors are JSON
naming the field at fault and the fix; a 429 carries retry_after_seconds."""


async def _blocking(ctx: Context, what: str, call: Callable[[], T]) -> T:
    """Runs `call` on a thread, reporting progress each second until it returns. Its exception
    is caught on the thread and raised here, outside the task group (which would wrap it)."""
    started = time.monotonic()
    outcome: list[Any] = []

    def guarded() -> None:
        try:
            outcome.append((True, call()))
        except Exception as exc:  # noqa: BLE001 - re-raised below, as it was
            outcome.append((False, exc))

    async def work() -> None:
        await anyio.to_thread.run_sync(guarded)
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(work)
        await ctx.report_progress(0, None, f"{what}: sent")
        while True:
            await anyio.sleep(PROGRESS_EVERY_SECONDS)
            elapsed = time.monotonic() - started
            await ctx.report_progress(elapsed, None, f"{what}: waiting for the server, {elapsed:.0f} s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


async def _call(ctx: Context, what: str, call: Callable[[], T]) -> T:
    try:
        return await _blocking(ctx, what, call)
    except (KCoralError, TransportError, ProtocolError) as error:
        raise from_client_error(error, what) from None


def _timeout(value: float | None, default: float | None) -> float | None:
    """A call's timeout_seconds, else kcoral mcp's, else None: the server's default (it caps either)."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
        raise tool_error("timeout_seconds must be in (0, 3600]", field="timeout_seconds", fix="e.g. 120")
    return float(value)


def build_server(
    client: Client,
    *,
    timeout_seconds: float | None = None,
    log_level: str = "WARNING",
    libraries: Libraries | None = None,
) -> MCPServer:
    from kcoral import __version__

    server = MCPServer("kcoral", version=__version__, instructions=INSTRUCTIONS, log_level=log_level)
    libraries = libraries if libraries is not None else Libraries()
    default_timeout = timeout_seconds
    devices: list[str] = []  # the server's device, asked once: a server does not change it

    async def device(ctx: Context) -> str:
        if not devices:
            devices.append((await _call(ctx, "evaluate", client.health)).get("device", "cpu"))
        return devices[0]

    @server.tool(annotations=READS)
    async def target(ctx: Context) -> dict[str, Any]:
        """The service's device (cpu or gpu), its GPUs and compile target (arch), toolchain
        versions (tvm_ffi, nvcc, ...), whether benchmarks time on the host, and its load."""
        health = await _call(ctx, "target", client.health)
        wanted = ("device", "gpu_count", "target", "versions", "cpu_execution", "load", "auth", "tls", "cluster")
        answer = {key: health[key] for key in wanted if key in health}
        answer.update({key: value for key, value in health.items() if key.startswith("gpu") and key not in answer})
        answer["compile_languages"] = ["cpp", "cuda"] if "nvcc" in health.get("versions", {}) else ["cpp"]
        return answer

    @server.tool(annotations=READS)
    async def usage(ctx: Context) -> dict[str, Any]:
        """This API key's usage and what is left of its quota: requests, CPU and GPU seconds in
        the window and when it ends, in-flight limit, largest request, GPU count allowed."""
        return await _call(ctx, "usage", client.usage)

    @server.tool(name="compile", annotations=SPENDS)
    async def compile_tool(
        ctx: Context,
        source: Annotated[
            str,
            Field(
                description="C++ (or CUDA) source defining the functions, TVM-FFI style: "
                "void add_one(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {...}"
            ),
        ],
        functions: Annotated[list[str], Field(description="names of the functions to export, e.g. ['add_one']")],
        language: Annotated[str, Field(description="'cpp' (host code) or 'cuda' (needs nvcc on the server)")] = "cpp",
        extra_cflags: Annotated[list[str] | None, Field(description="compiler flags, e.g. ['-O3']")] = None,
        arch: Annotated[
            str | None,
            Field(description="CUDA only: the architecture, e.g. 'sm_90a'; default the server's target arch"),
        ] = None,
        timeout_seconds: Annotated[float | None, Field(description=TIMEOUT_HELP)] = None,
    ) -> dict[str, Any]:
        """Compile source with tvm_ffi.cpp.build_inline on the service's CPU pool (no GPU held).
        Answers library_sha256, the handle `evaluate` and `run` take; or a tool error with the
        compiler's diagnostics at the lines of your source."""
        if language == "cuda" and arch is None:  # the CPU pool has no GPU to ask: the server's target says
            arch = (await _call(ctx, "compile", client.health)).get("target", {}).get("arch")
        program = programs.compile_program(source, language, functions, extra_cflags, arch)
        limit = _timeout(timeout_seconds, default_timeout)
        result = await _call(ctx, "compile", lambda: client.execute(program, timeout_seconds=limit))
        if not result.completed:
            raise answers.failed_step(result)
        compiled = result.results["compiled"]
        if not compiled.get("ok"):
            first = (compiled.get("diagnostics") or [{}])[0]  # the caller's own lines come first
            said = first.get("message") or next((line for line in compiled.get("log", "").splitlines() if line), None)
            where = f" ({first['file']} line {first['line']})" if first.get("line") else ""
            raise tool_error(
                f"compile failed: {said or compiled.get('error')}{where}",
                field="source",
                fix="change the source at the lines in diagnostics and compile again",
                diagnostics=compiled.get("diagnostics"),
                log=compiled.get("log"),
            )
        library = compiled["library"]
        return {
            "library_sha256": libraries.add(library),
            "bytes": len(library),
            "functions": functions,
            "language": language,
            "lease": answers.lease(result),
        }

    @server.tool(annotations=SPENDS)
    async def evaluate(
        ctx: Context,
        function: Annotated[str, Field(description="the candidate function's name in the library or module")],
        reference: Annotated[
            str,
            Field(
                description="Python source defining reference(*inputs) -> the expected "
                "output (a tuple for several); it gets numpy arrays on a CPU server, torch CUDA tensors on a GPU one"
            ),
        ],
        inputs: Annotated[
            list[dict[str, Any]],
            Field(
                description="input tensors, made on the worker (numpy on a CPU server, torch CUDA on a GPU one): "
                "[{'shape': [1024], 'dtype': 'float32', 'fill': 'randn', 'seed': 0}]; fill: randn, rand, "
                "randint (low, high), zeros, ones, arange"
            ),
        ],
        outputs: Annotated[
            list[dict[str, Any]],
            Field(
                description="output tensors (zeroed) passed after the inputs: "
                "the candidate is called function(*inputs, *outputs); empty: it returns its value"
            ),
        ] = [],  # noqa: B006 - pydantic copies a default
        library_sha256: Annotated[str | None, Field(description="a library `compile` answered in this session")] = None,
        module: Annotated[
            str | None, Field(description="instead of a library: Python source defining function")
        ] = None,
        reference_function: Annotated[str, Field(description="the reference's function name")] = "reference",
        rtol: Annotated[float | None, Field(description="relative tolerance (default 1e-2)")] = None,
        atol: Annotated[float | None, Field(description="absolute tolerance (default 1e-3)")] = None,
        warmup_ms: Annotated[float | None, Field(description="benchmark warm-up budget (default 25)")] = None,
        repeat_ms: Annotated[float | None, Field(description="benchmark timing budget (default 100)")] = None,
        timeout_seconds: Annotated[float | None, Field(description=TIMEOUT_HELP)] = None,
    ) -> dict[str, Any]:
        """Check a compiled library (or a Python module) against a reference on the same inputs,
        then time it with kcoral.builtins.benchmark (CUDA events on a GPU server, the host timer
        on a CPU one). Answers correct, the median with its spread, integrity.trusted with its
        reasons, and the lease used."""
        if (library_sha256 is None) == (module is None):
            raise tool_error(
                "give exactly one of library_sha256 and module",
                field="library_sha256",
                fix="library_sha256 from `compile`, or module as Python source",
            )
        library = None
        if library_sha256 is not None:
            library = libraries.get(library_sha256)
            if library is None:
                raise tool_error(
                    f"no library {library_sha256!r} was compiled in this session",
                    field="library_sha256",
                    fix="call compile and use the library_sha256 it answers (libraries live as long as kcoral mcp)",
                )
        program = programs.evaluate_program(
            library=library,
            library_sha256=library_sha256,
            module=module,
            function=function,
            reference=reference,
            reference_function=reference_function,
            inputs=inputs,
            outputs=outputs,
            rtol=rtol,
            atol=atol,
            warmup_ms=warmup_ms,
            repeat_ms=repeat_ms,
            on_gpu=await device(ctx) == "gpu",
        )
        limit = _timeout(timeout_seconds, default_timeout)
        result = await _call(ctx, "evaluate", lambda: client.execute(program, timeout_seconds=limit))
        if not result.completed:
            raise answers.evaluate_failure(result)
        return answers.evaluate_answer(result)

    @server.tool(name="run", annotations=SPENDS)
    async def run_tool(
        ctx: Context,
        program: Annotated[
            dict[str, Any],
            Field(
                description="{'instructions': [...]} in the protocol's JSON "
                "(upload, get_function, run, return; references as {'$ref': id}); bytes and library uploads "
                "give 'blob' (a library_sha256 of this session) or 'value_base64'"
            ),
        ],
        timeout_seconds: Annotated[float | None, Field(description=TIMEOUT_HELP)] = None,
        gpu_count: Annotated[int | None, Field(description="GPUs to lease (GPU servers)")] = None,
    ) -> dict[str, Any]:
        """Run any program on the service and answer its status, returned values (bytes by size
        and hash, arrays by dtype, shape and first values), stdout, stderr, error and lease."""
        built = program_from_json(program, libraries)
        limit = _timeout(timeout_seconds, default_timeout)
        result = await _call(ctx, "run", lambda: client.execute(built, timeout_seconds=limit, gpu_count=gpu_count))
        return answers.run_answer(result)

    return server
