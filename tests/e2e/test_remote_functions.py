"""Remote functions (protocol §5.6) against real servers: our client and the
reference client (PyPI kcoral 0.1.1) against our server, and our client
against the reference server. One server per module (shared_server)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from kcoral import Client, KCoralError, RemoteExecutionError
from test_reference_client import reference_environment, reference_python
from test_reference_server import reference_server  # noqa: F401 (a fixture)

HERE = Path(__file__).resolve().parent


# Plain functions, wrapped by each test with the options it needs.
def add(a, b=5, *, scale=1):
    return (a + b) * scale


def describe(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


def payload_stats(data, label="blob"):
    import hashlib

    return {"label": label, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "echo": bytes(data)}


def scale_array(values, factor):
    import numpy as np

    return np.asarray(values) * factor


def divide(a, b):
    return a / b


def sleeps(seconds):
    import time

    time.sleep(seconds)
    return "woke"


def prints(n):
    print("x" * n)
    return n


def returns_a_function():
    return len


def fact(n):
    return 1 if n <= 1 else n * fact(n - 1)


# -------------------------------------------------- ours against ours
def test_remote_returns_json_values(client):
    assert client.function()(add).remote(2, scale=3) == 21
    assert client.function()(fact).remote(10) == 3628800
    assert client.function()(describe).remote(None, True, 1.5, "s", 10**30, [1, [2]], k={"a": [{}]}) == {
        "args": [None, True, 1.5, "s", 10**30, [1, [2]]],
        "kwargs": {"k": {"a": [{}]}},
    }


def test_kwargs_defaults_and_ref_shaped_literals(client):
    remote_add = client.function()(add)
    assert remote_add.remote(1) == 6 and remote_add.remote(1, b=2) == 3 and remote_add.remote(a=1, b=1, scale=4) == 8
    # data shaped like a reference arrives as data, at the top level and nested
    assert client.function()(describe).remote({"$ref": "module"}, [{"$ref": "output"}], k={"$ref": "function"}) == {
        "args": [{"$ref": "module"}, [{"$ref": "output"}]],
        "kwargs": {"k": {"$ref": "function"}},
    }


def test_bytes_and_numpy_round_trip(client):
    data = bytes(range(256)) * 16
    stats = client.function()(payload_stats).remote(bytearray(data), label="raw")
    assert stats["label"] == "raw" and stats["size"] == len(data) and stats["echo"] == data
    assert isinstance(stats["echo"], bytes)
    values = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = client.function()(scale_array).remote(values, 2)
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, 4)
    np.testing.assert_array_equal(out, values * 2)


def test_an_exception_raises_remote_execution_error_with_the_traceback(client):
    with pytest.raises(RemoteExecutionError, match="ZeroDivisionError") as caught:
        client.function()(divide).remote(1, 0)
    result = caught.value.result
    assert result.status == "FAILED"
    error = result.error
    assert error["kind"] == "engine" and error["instruction_id"] == "output" and error["instruction_op"] == "run"
    assert "ZeroDivisionError" in error["traceback"] and "in divide" in error["traceback"]
    assert "return a / b" in error["traceback"]  # the server has the uploaded source for the traceback


def test_a_value_that_cannot_be_returned_is_a_serialization_failure(client):
    with pytest.raises(RemoteExecutionError) as caught:
        client.function()(returns_a_function).remote()
    assert caught.value.result.error["kind"] == "serialization"


def test_timeout_is_honoured(client):
    started = time.monotonic()
    with pytest.raises(KCoralError) as caught:
        client.function(timeout=1)(sleeps).remote(25)
    assert caught.value.status_code == 504 and caught.value.kind == "timeout"
    assert time.monotonic() - started < 15
    assert client.function(timeout=10)(sleeps).remote(0) == "woke"


def test_output_limit_bytes_is_honoured(client):
    result = client.function(output_limit_bytes=100)(prints).execute(5000)
    assert result.completed and result.results["output"] == 5000
    assert result.stdout == "x" * 100 and result.stdout_truncated is True
    quiet = client.function(output_limit_bytes=0)(prints).execute(10)
    assert quiet.stdout == "" and quiet.stdout_truncated is False


def test_cpu_only_is_sent_and_runs(client, shared_server):
    cpu_add = client.function(cpu_only=True)(add)
    assert cpu_add.build_program(1).instructions[1]["cpu_only"] is True
    assert cpu_add.remote(1, 1) == 2


# ---------------------------------------- the reference client against ours
def test_reference_client_remote_functions_run_on_our_server(shared_server):
    python = reference_python()
    run = subprocess.run(
        [str(python), str(HERE / "reference_remote_functions.py"), shared_server.url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
        env=reference_environment(),
    )
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["add"] == 21
    assert report["defaults"] == 6
    assert report["describe"] == {
        "args": [{"$ref": "module"}, [{"$ref": "x"}], None, True, 1.5, "s"],
        "kwargs": {"k": {"$ref": "output"}},
    }
    assert report["bytes"] == {"size": 4096, "echo_ok": True, "label": "raw"}
    assert report["numpy"] == {"dtype": "float32", "shape": [3, 4], "ok": True}
    assert report["error"]["type"] == "RemoteExecutionError"
    assert report["error"]["kind"] == "engine" and report["error"]["traceback_has_cause"] is True
    assert report["cpu_only"] == 2
    assert report["output_limit"] == {"stdout": "x" * 10, "truncated": True}


# -------------------------------------- ours against the reference server
def mixed(data, refs, *rest, scale=2, **options):
    return {"size": len(data), "echo": bytes(data), "refs": refs, "rest": list(rest), "scale": scale, **options}


def test_our_remote_functions_run_on_the_reference_server(reference_server):  # noqa: F811
    # Two requests: each costs seconds there (a fresh worker per request).
    data = bytes(range(256)) * 8
    with Client(reference_server) as client:
        out = client.function(timeout=60)(mixed).remote(data, [{"$ref": "module"}], {"$ref": "x"}, flag=True)
        assert out == {
            "size": len(data),
            "echo": data,
            "refs": [{"$ref": "module"}],
            "rest": [{"$ref": "x"}],
            "scale": 2,
            "flag": True,
        }
        with pytest.raises(RemoteExecutionError, match="ZeroDivisionError") as caught:
            client.function(output_limit_bytes=1000)(divide).remote(1, 0)
        error = caught.value.result.error
        assert error["kind"] == "engine" and "ZeroDivisionError" in error["traceback"]
