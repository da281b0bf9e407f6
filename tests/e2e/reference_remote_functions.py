"""Remote functions of the reference client (PyPI kcoral 0.1.1) against our
server (test_remote_functions.py runs this in the reference client's venv).

Imports nothing from this repository. Prints one JSON line: the report.
"""

import json
import sys

import numpy as np
from kcoral import Client, RemoteExecutionError
import kcoral

# This must be the reference package of the venv, never this checkout's.
assert "reference-client-venv" in kcoral.__file__, f"imported {kcoral.__file__}, not the reference client"

client = Client(sys.argv[1])


@client.function(timeout=60)
def add(a, b=5, *, scale=1):
    return (a + b) * scale


@client.function()
def describe(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@client.function()
def payload(data, label="blob"):
    return {"label": label, "size": len(data), "echo": bytes(data)}


@client.function()
def scale_array(values, factor):
    import numpy as np

    return np.asarray(values) * factor


@client.function()
def divide(a, b):
    return a / b


@client.function(cpu_only=True)
def cpu_add(a, b):
    return a + b


@client.function(output_limit_bytes=10)
def prints(n):
    print("x" * n)
    return n


report = {}
report["add"] = add.remote(2, scale=3)
report["defaults"] = add.remote(1)
report["describe"] = describe.remote({"$ref": "module"}, [{"$ref": "x"}], None, True, 1.5, "s", k={"$ref": "output"})
data = bytes(range(256)) * 16
stats = payload.remote(data, label="raw")
report["bytes"] = {"size": stats["size"], "echo_ok": stats["echo"] == data, "label": stats["label"]}
values = np.arange(12, dtype=np.float32).reshape(3, 4)
out = scale_array.remote(values, 2)
report["numpy"] = {"dtype": str(out.dtype), "shape": list(out.shape), "ok": bool((out == values * 2).all())}
try:
    divide.remote(1, 0)
    report["error"] = None
except RemoteExecutionError as exc:
    error = exc.result.error
    report["error"] = {
        "type": type(exc).__name__,
        "kind": error["kind"],
        "traceback_has_cause": "ZeroDivisionError" in error["traceback"],
    }
report["cpu_only"] = cpu_add.remote(1, 1)
result = prints.execute(100)
report["output_limit"] = {"stdout": result.stdout, "truncated": result.stdout_truncated}
print(json.dumps(report))
