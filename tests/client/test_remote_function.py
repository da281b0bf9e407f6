"""Remote functions on the client side (protocol §5.6): the checks made when a
function is decorated, local calls, and the wire shape of build_program,
compared with what the reference client (PyPI kcoral 0.1.1) builds."""

from __future__ import annotations

import ast
import fcntl
import functools
import hashlib
import inspect
import json
import math
import os
import subprocess
import textwrap
import venv
from pathlib import Path

import numpy as np
import pytest

from kcoral import Client, Program, ProtocolError, RemoteExecutionError, RemoteFunction
from kcoral.result import ProgramResult

REPO = Path(__file__).resolve().parents[2]
REFERENCE_VENV = REPO / "build" / "reference-client-venv"  # shared with tests/e2e/test_reference_client.py

client = Client("http://127.0.0.1:9")  # never contacted: these tests only build programs
GLOBAL_CONSTANT = 3


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# Module-level functions, wrapped in the tests (and by the reference client).
def add(a: int, b: int = 5, *, scale: float = GLOBAL_CONSTANT) -> float:
    """Adds and scales."""
    return (a + b) * scale


def everything(x, /, y, *args, z=3, **kw):
    return [x, y, list(args), z, kw]


def echo(*args, **kwargs):
    return [list(args), kwargs]


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


def values(nargs, names):  # named like the trampoline's parameters
    return [nargs, names]


def uses_math(x):
    return math.sqrt(x)


def uses_constant():
    return GLOBAL_CONSTANT


def imports_inside(x):
    import math
    from os import path as ospath

    return [math.floor(x), ospath.basename("/a/b")]


def nested_scopes(values):
    def double(v: np.ndarray = None) -> np.ndarray:  # inner annotations stay, unevaluated
        return v * 2

    class Box:
        size = len(values)

        def get(self):
            return self.size

    return [double(v) for v in values if v] + [Box().get(), (lambda q=1: q)()]


def inner_default_uses_global():
    def inner(x=GLOBAL_CONSTANT):
        return x

    return inner()


def writes_global():
    global NEW_GLOBAL
    NEW_GLOBAL = 1


def reads_module_dunder():
    return __name__


def method_uses_global():
    class A:
        def m(self):
            return GLOBAL_CONSTANT

    return A().m()


def multiline_string():
    text = """
first
  second"""
    return text


def ident(fn):
    return fn


@ident
def one_foreign_decorator():
    return 1


@ident
@functools.lru_cache
def two_decorators():
    return 1


def wrapped_by_wraps(fn):
    @functools.wraps(fn)
    def wrapper(*a, **k):
        return fn(*a, **k)

    return wrapper


async def coroutine():
    return 1


async def async_generator():
    yield 1


def generator():
    yield 1


# ------------------------------------------------------------ helpers
def instructions(program: Program) -> list[dict]:
    return [dict(ins) for ins in program.instructions]


def run_in_process(program: Program):
    """Executes a remote-function program here, as a server would: exec the
    module, resolve top-level references, call the trampoline."""
    bound: dict[str, object] = {}
    result = None
    for ins in program.instructions:
        if ins["op"] == "upload" and ins["kind"] == "module":
            namespace: dict = {}
            exec(compile(ins["source"], "<uploaded>", "exec"), namespace)
            bound[ins["id"]] = namespace
        elif ins["op"] == "upload":
            data = program._blobs[ins["blob"]]
            if ins["kind"] == "bytes":
                bound[ins["id"]] = data
            else:
                bound[ins["id"]] = np.frombuffer(data, dtype=ins["dtype"]).reshape(ins["shape"])
        elif ins["op"] == "get_function":
            bound[ins["id"]] = bound[ins["module"]["$ref"]][ins["name"]]
        elif ins["op"] == "run":
            args = [bound[a["$ref"]] if isinstance(a, dict) and list(a) == ["$ref"] else a for a in ins["args"]]
            bound[ins["id"]] = bound[ins["fn"]["$ref"]](*args)
        else:
            result = bound[ins["value"]["$ref"]]
    return result


def canonical(value) -> str:
    """JSON text of a value, bytes-likes as bytes and arrays as lists (what a
    server hands the function: bytes for bytearray, an array for a tensor)."""

    def default(item):
        if isinstance(item, (bytes, bytearray, memoryview)):
            return repr(bytes(item))
        if isinstance(item, np.ndarray):
            return [str(item.dtype), item.tolist()]
        return repr(item)

    return json.dumps(value, default=default)


class FakeClient:
    """Records execute() calls; answers with a canned ProgramResult."""

    def __init__(self, result: ProgramResult) -> None:
        self.result = result
        self.calls: list[tuple[Program, dict]] = []

    def execute(self, program, **options):
        self.calls.append((program, options))
        return self.result


def outcome(status="COMPLETED", results=None, error=None) -> ProgramResult:
    return ProgramResult(
        status=status,
        request_id="r",
        queue_ms=0.0,
        elapsed_ms=1.0,
        lease_wait_ms=0.0,
        lease_held_ms=0.0,
        results=results if results is not None else {},
        stdout="",
        stderr="",
        stdout_truncated=False,
        stderr_truncated=False,
        error=error,
    )


# ---------------------------------------------------- decorator options
@pytest.mark.parametrize(
    "options, error, words",
    [
        ({"timeout": 0}, ValueError, "timeout"),
        ({"timeout": -1.5}, ValueError, "timeout"),
        ({"timeout": float("inf")}, ValueError, "timeout"),
        ({"timeout": float("nan")}, ValueError, "timeout"),
        ({"timeout": True}, TypeError, "timeout"),
        ({"timeout": "10"}, TypeError, "timeout"),
        ({"output_limit_bytes": -1}, ValueError, "output_limit_bytes"),
        ({"output_limit_bytes": 1.0}, TypeError, "output_limit_bytes"),
        ({"output_limit_bytes": True}, TypeError, "output_limit_bytes"),
        ({"cpu_only": 1}, TypeError, "cpu_only"),
        ({"cpu_only": None}, TypeError, "cpu_only"),
    ],
)
def test_decorator_options_are_checked_when_the_decorator_is_made(options, error, words):
    with pytest.raises(error, match=words):
        client.function(**options)


def test_valid_decorator_options():
    for options in [{}, {"timeout": 1}, {"timeout": 0.5, "output_limit_bytes": 0, "cpu_only": True}]:
        assert isinstance(client.function(**options)(add), RemoteFunction)


def test_decorator_takes_keywords_only():
    with pytest.raises(TypeError):
        client.function(add)  # bare @client.function is a mistake: it needs ()


# ----------------------------------------------------- decoration checks
@pytest.mark.parametrize(
    "fn, error, words",
    [
        (coroutine, TypeError, "synchronous.*coroutine"),
        (async_generator, TypeError, "synchronous.*async_generator"),
        (generator, TypeError, "generator"),
        (lambda x: x, ValueError, "lambda"),
        (len, TypeError, "plain Python functions"),
        (functools.partial(add, 1), TypeError, "partial"),
        (FakeClient(outcome()).execute, TypeError, "bound method"),
        (uses_math, ValueError, "globals.*math"),
        (uses_constant, ValueError, "globals.*GLOBAL_CONSTANT"),
        (inner_default_uses_global, ValueError, "GLOBAL_CONSTANT"),
        (writes_global, ValueError, "NEW_GLOBAL"),
        (reads_module_dunder, ValueError, "__name__"),
        (method_uses_global, ValueError, "GLOBAL_CONSTANT"),
        (two_decorators, ValueError, "other decorators"),
        (wrapped_by_wraps(add), ValueError, "other decorators"),
    ],
)
def test_decoration_rejects(fn, error, words):
    with pytest.raises(error, match=words):
        client.function()(fn)


def test_two_decorators_in_source_are_rejected():
    with pytest.raises(ValueError, match=r"other decorators.*@ident"):

        @ident
        @client.function()
        def twice():
            return 1


def test_closures_are_rejected():
    captured = 1
    with pytest.raises(ValueError, match="captures.*captured"):

        @client.function()
        def uses_captured():
            return captured


def test_source_must_be_retrievable():
    namespace: dict = {}
    exec("def made_by_exec():\n    return 1\n", namespace)
    with pytest.raises(ValueError, match="source"):
        client.function()(namespace["made_by_exec"])


def test_redecorating_a_remote_function_is_rejected():
    with pytest.raises(ValueError, match="other decorators"):
        client.function()(client.function()(add))


@pytest.mark.parametrize(
    "fn", [add, everything, fact, values, imports_inside, nested_scopes, one_foreign_decorator, multiline_string]
)
def test_decoration_accepts(fn):
    # builtins, imports inside, nested defs/classes/comprehensions, globals in
    # the function's own defaults and annotations (evaluated here), its own
    # name (recursion), one decorator in its source (the one that wrapped it)
    assert isinstance(client.function()(fn), RemoteFunction)


def test_a_nested_def_without_closure_is_accepted():
    @client.function(timeout=5)
    def nested(a, b=2):
        return a * b

    assert nested(3) == 6
    assert "def nested(a, b):" in nested.build_program(1).instructions[0]["source"]


# ----------------------------------------------------------- local call
def test_calling_runs_locally_and_keeps_the_function_metadata():
    add._fn = "an attribute of the function"  # copied onto the wrapper, without clobbering it
    try:
        remote_add = client.function()(add)
    finally:
        del add._fn
    assert remote_add(1) == 18 and remote_add(1, 2, scale=1) == 3
    assert remote_add.__name__ == "add" and remote_add.__doc__ == "Adds and scales."
    assert remote_add.__wrapped__ is add
    assert inspect.signature(remote_add) == inspect.signature(add)


# ----------------------------------------------------------- wire shape
def test_wire_shape_of_json_arguments_with_defaults_and_kwargs():
    ins = instructions(client.function()(add).build_program(1, scale=2))
    assert [i["op"] for i in ins] == ["upload", "get_function", "run", "return"]
    module, get_function, run, ret = ins
    assert {k: v for k, v in module.items() if k != "source"} == {"op": "upload", "id": "module", "kind": "module"}
    assert get_function == {
        "op": "get_function",
        "id": "function",
        "module": {"$ref": "module"},
        "name": "_kcoral_invoke_add",
    }
    assert run == {
        "op": "run",
        "id": "output",
        "fn": {"$ref": "function"},
        "args": [2, ["scale"], [True, True, True], {"value": 1}, {"value": 5}, {"value": 2}],
    }
    assert ret == {"op": "return", "key": "output", "value": {"$ref": "output"}}


def test_module_source_is_stripped_and_carries_the_trampoline():
    source = instructions(client.function()(add).build_program(1))[0]["source"]
    assert source.startswith("from __future__ import annotations\n")
    tree = ast.parse(source)
    defs = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert set(defs) == {"add", "_kcoral_invoke_add"}
    fn = defs["add"]
    assert fn.decorator_list == [] and fn.returns is None
    assert fn.args.defaults == [] and fn.args.kw_defaults == [None]
    assert all(a.annotation is None for a in fn.args.args + fn.args.kwonlyargs)
    assert ast.get_docstring(fn) == "Adds and scales."
    trampoline = defs["_kcoral_invoke_add"].args
    assert [a.arg for a in trampoline.args] == ["nargs", "names", "literals"] and trampoline.vararg.arg == "values"
    assert "GLOBAL_CONSTANT" not in source


def test_decorators_are_stripped():
    @client.function(cpu_only=True)
    def decorated(x):
        return x

    source = decorated.build_program(1).instructions[0]["source"]
    assert "@" not in source and "client" not in source


def test_cpu_only_is_written_only_when_true():
    assert client.function(cpu_only=True)(add).build_program(1).instructions[1]["cpu_only"] is True
    assert "cpu_only" not in client.function()(add).build_program(1).instructions[1]


def test_positional_only_varargs_and_varkw():
    run = instructions(client.function()(everything).build_program(1, 2, 3, 4, z=5, w=6))[2]
    assert run["args"][:3] == [4, ["z", "w"], [True] * 6]
    assert run["args"][3:] == [{"value": v} for v in (1, 2, 3, 4, 5, 6)]
    # a **kw key named like a positional-only parameter
    run = instructions(client.function()(everything).build_program(1, 2, x=3))[2]
    assert run["args"][:3] == [2, ["z", "x"], [True] * 4]


def test_ref_shaped_data_is_wrapped_as_a_literal():
    payload = {"$ref": "module"}
    run = instructions(client.function()(echo).build_program(payload, [{"$ref": "arg_0"}], k={"$ref": "output"}))[2]
    assert run["args"] == [
        2,
        ["k"],
        [True, True, True],
        {"value": {"$ref": "module"}},
        {"value": [{"$ref": "arg_0"}]},
        {"value": {"$ref": "output"}},
    ]


def test_literals_are_snapshots():
    data = {"a": [1, 2]}
    program = client.function()(echo).build_program(data)
    data["a"].append(3)
    assert program.instructions[2]["args"][3] == {"value": {"a": [1, 2]}}


def test_bytes_like_arguments_are_bytes_uploads():
    program = client.function()(echo).build_program(b"abc", bytearray(b"x"), b"", m=memoryview(b"yz"))
    ins = instructions(program)
    uploads = ins[2:6]
    assert uploads == [
        {"op": "upload", "id": "arg_0", "kind": "bytes", "blob": sha(b"abc")},
        {"op": "upload", "id": "arg_1", "kind": "bytes", "blob": sha(b"x")},
        {"op": "upload", "id": "arg_2", "kind": "bytes", "blob": sha(b"")},
        {"op": "upload", "id": "arg_3", "kind": "bytes", "blob": sha(b"yz")},
    ]
    assert ins[6]["args"] == [3, ["m"], [False] * 4] + [{"$ref": f"arg_{i}"} for i in range(4)]


def test_numpy_and_dlpack_arguments_are_tensor_uploads():
    class DLPackOnly:
        def __init__(self, array):
            self.array = array

        def __dlpack__(self, *args, **kwargs):
            return self.array.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self):
            return self.array.__dlpack_device__()

    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(3, dtype=np.int16)
    big_endian = np.array([1.5, 2.5], dtype=">f8")
    ins = instructions(client.function()(echo).build_program(1, a[:, ::2], DLPackOnly(b), big_endian))
    assert ins[2] == {
        "op": "upload",
        "id": "arg_1",
        "kind": "tensor",
        "blob": sha(np.ascontiguousarray(a[:, ::2]).tobytes()),
        "dtype": "float32",
        "shape": [2, 2],
    }
    assert ins[3]["id"] == "arg_2" and ins[3]["dtype"] == "int16" and ins[3]["blob"] == sha(b.tobytes())
    assert ins[4]["dtype"] == "float64" and ins[4]["blob"] == sha(big_endian.astype("<f8").tobytes())
    assert ins[5]["args"][:4] == [4, [], [True, False, False, False], {"value": 1}]


@pytest.mark.parametrize(
    "args, kwargs, error, words",
    [
        (((1, 2),), {}, TypeError, r"argument args\[0\] has unsupported type tuple"),
        (([(1, 2)],), {}, TypeError, r"args\[0\]\[0\] has unsupported type tuple"),
        ((), {"opt": {"k": {1: 2}}}, TypeError, r"kwargs\['opt'\]\['k'\] has a key 1"),
        (([b"x"],), {}, TypeError, r"args\[0\]\[0\] is bytes-like inside a container"),
        (({"t": np.zeros(1)},), {}, TypeError, r"is a tensor inside a container"),
        ((float("nan"),), {}, ValueError, r"args\[0\] is nan"),
        (([float("inf")],), {}, ValueError, r"args\[0\]\[0\] is inf"),
        ((object(),), {}, TypeError, "unsupported type object"),
        ((np.float32(1),), {}, TypeError, "unsupported type float32"),
        ((np.array(["a"]),), {}, ValueError, r"argument args\[0\].*dtype"),
    ],
)
def test_unsupported_arguments_name_the_argument(args, kwargs, error, words):
    with pytest.raises(error, match=words):
        client.function()(echo).build_program(*args, **kwargs)


def test_subclasses_of_json_types_are_rejected():
    import enum
    from collections import OrderedDict

    class Color(enum.IntEnum):
        RED = 1

    for value in [Color.RED, OrderedDict(a=1), type("S", (str,), {})("x")]:
        with pytest.raises(TypeError, match="unsupported type"):
            client.function()(echo).build_program(value)


def test_circular_containers_are_rejected_shared_ones_are_not():
    shared = [1]
    assert client.function()(echo).build_program({"a": shared, "b": shared}).instructions[2]["args"][3] == {
        "value": {"a": [1], "b": [1]}
    }
    loop: list = []
    loop.append(loop)
    with pytest.raises(ValueError, match="circular"):
        client.function()(echo).build_program(loop)


def test_binding_errors_name_the_function():
    with pytest.raises(TypeError, match=r"add\(\): missing a required argument: 'a'"):
        client.function()(add).build_program()
    with pytest.raises(TypeError, match="unexpected keyword"):
        client.function()(add).build_program(1, nope=2)


# --------------------------------------------- the program, run in-process
@pytest.mark.parametrize(
    "fn, args, kwargs",
    [
        (add, (1,), {"scale": 2}),
        (everything, (1, 2, 3, 4), {"z": 5, "w": 6}),
        (everything, (1, 2), {"x": 3}),
        (echo, ({"$ref": "module"}, b"raw", np.arange(3, dtype=np.int64)), {"k": [None, True, 1.5, "s"]}),
        (fact, (5,), {}),
        (values, ([1], ["a"]), {}),
        (imports_inside, (2.5,), {}),
        (nested_scopes, ([1, 0, 2],), {}),
        (multiline_string, (), {}),
    ],
)
def test_the_program_computes_what_the_local_call_does(fn, args, kwargs):
    remote = client.function()(fn)
    expected = remote(*args, **kwargs)
    got = run_in_process(remote.build_program(*args, **kwargs))
    assert canonical(got) == canonical(expected)


def test_a_nested_function_keeps_its_multiline_strings():
    def indented():
        return """a
  b"""

    remote = client.function()(indented)
    assert run_in_process(remote.build_program()) == "a\n  b"


def test_the_trampoline_checks_its_arguments():
    program = client.function()(add).build_program(1)
    namespace: dict = {}
    exec(program.instructions[0]["source"], namespace)
    with pytest.raises(TypeError, match="malformed remote function call"):
        namespace["_kcoral_invoke_add"](2, [], [True], {"value": 1})


# ------------------------------------------------------ execute and remote
def test_execute_passes_the_decorator_options():
    fake = FakeClient(outcome(results={"output": 7}))
    remote = client.function(timeout=12.5, output_limit_bytes=100)(add)
    remote._client = fake
    assert remote.remote(1) == 7
    program, options = fake.calls[0]
    assert options == {"timeout_seconds": 12.5, "output_limit_bytes": 100}
    assert program.instructions[2]["args"][3] == {"value": 1}
    assert remote.execute(1) is fake.result


def test_remote_raises_remote_execution_error_when_not_completed():
    error = {
        "kind": "engine",
        "message": "ZeroDivisionError: division by zero",
        "instruction_index": 2,
        "instruction_op": "run",
        "instruction_id": "output",
        "traceback": "Traceback ...",
    }
    failed = outcome(status="FAILED", error=error)
    remote = client.function()(add)
    remote._client = FakeClient(failed)
    with pytest.raises(RemoteExecutionError, match="ZeroDivisionError") as caught:
        remote.remote(1)
    assert caught.value.result is failed and isinstance(caught.value, RuntimeError)


def test_remote_raises_protocol_error_without_output():
    remote = client.function()(add)
    remote._client = FakeClient(outcome(results={"other": 1}))
    with pytest.raises(ProtocolError, match="output"):
        remote.remote(1)


# ------------------------------------------------ against the reference
REFERENCE_DRIVER = textwrap.dedent(
    """
    import json, sys, importlib.util
    import numpy as np
    from kcoral import Client

    spec = importlib.util.spec_from_file_location("samples", sys.argv[1])
    samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(samples)
    client = Client("http://127.0.0.1:9")
    out = []
    for name, args, kwargs in samples.CASES:
        remote = client.function(cpu_only=name.startswith("cpu"))(getattr(samples, name))
        program = remote.build_program(*args, **kwargs)
        out.append([dict(i) for i in program.instructions])
    print(json.dumps(out))
    """
)

SAMPLES = textwrap.dedent(
    '''
    import numpy as np

    def add(a: int, b: int = 5, *, scale: float = 2.0) -> float:
        """Adds and scales."""
        import math
        return (a + b) * scale

    def everything(x, /, y, *args, z=3, **kw):
        return [x, y, list(args), z, kw]

    def cpu_echo(*args, **kwargs):
        return [list(args), kwargs]

    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    def nested(values):
        def double(v: int = 0) -> int:
            return v * 2
        return [double(v) for v in values]

    def zip(values, names):  # named like a builtin the trampoline uses
        return [values, names]

    CASES = [
        ("add", (1,), {"scale": 3}),
        ("everything", (1, 2, 3, 4), {"z": 5, "w": 6}),
        ("everything", (1, 2), {"x": 3}),
        ("cpu_echo", ({"$ref": "module"}, [{"$ref": "x"}], None, True, 1.5, "s", 10**30),
         {"b": b"raw", "arr": np.arange(6, dtype=np.float32).reshape(2, 3), "m": bytearray(b"m")}),
        ("fact", (4,), {}),
        ("nested", ([1, 2],), {}),
        ("zip", ([1], ["a"]), {}),
    ]
    '''
)


def reference_python() -> Path:
    """The reference client's interpreter; made if missing, else skip."""
    python = REFERENCE_VENV / "bin" / "python"
    marker = REFERENCE_VENV / ".kcoral-0.1.1"
    REFERENCE_VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(REFERENCE_VENV.parent / f"{REFERENCE_VENV.name}.lock", "w") as lock:  # the e2e test's too
        fcntl.flock(lock, fcntl.LOCK_EX)  # under pytest-xdist another worker may be making it
        if not marker.exists():
            try:
                venv.create(REFERENCE_VENV, with_pip=True, clear=True)
                install = subprocess.run(
                    [str(python), "-m", "pip", "install", "-q", "kcoral==0.1.1"],
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                pytest.skip(f"cannot create the reference client's venv: {exc}")
            if install.returncode != 0:
                pytest.skip(f"cannot install the reference client: {install.stderr[-500:]}")
            marker.touch()
    return python


def _without_trampoline(source: str) -> str:
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name.startswith("_kcoral_invoke_"))]
    return ast.dump(tree)


def test_wire_shape_matches_the_reference_client(tmp_path):
    python = reference_python()
    samples_path = tmp_path / "samples.py"
    samples_path.write_text(SAMPLES)
    driver = tmp_path / "driver.py"
    driver.write_text(REFERENCE_DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the reference's kcoral, not ours
    run = subprocess.run(
        [str(python), str(driver), str(samples_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    theirs = json.loads(run.stdout)

    import importlib.util

    spec = importlib.util.spec_from_file_location("kcoral_rf_samples", samples_path)
    samples = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(samples)
    assert len(theirs) == len(samples.CASES)
    for (name, args, kwargs), reference in zip(samples.CASES, theirs):
        remote = client.function(cpu_only=name.startswith("cpu"))(getattr(samples, name))
        program = remote.build_program(*args, **kwargs)
        ours = instructions(program)
        our_source, their_source = ours[0].pop("source"), reference[0].pop("source")
        # Every instruction the same (blob digests included); the function's
        # text the same as an AST, while each client brings its own trampoline.
        assert ours == reference, name
        assert _without_trampoline(our_source) == _without_trampoline(their_source), name
        # The reference's uploaded module runs our call: same calling convention.
        expected = remote(*args, **kwargs)
        program._instructions[0] = {**program._instructions[0], "source": their_source}
        assert canonical(run_in_process(program)) == canonical(expected), name
