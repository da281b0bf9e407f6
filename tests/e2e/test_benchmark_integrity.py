"""Sealed benchmark results (issue "A benchmark that cannot be fooled"; docs/benchmark-integrity.md).

The host timer runs and seals in C++ (kcoral._core); the server checks the seal with the key of
the worker that ran the request and replaces what the program returned by the sealed record. Each
cheat below runs in the same worker as the timer, as an uploaded module would, and must end with
integrity.verified false, or verified but untrusted with the cheat named in the flags, or with the
sealed numbers restored. Fresh workers per request (the default) keep one test's patches away
from the next.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from conftest import call
from kcoral import Client, Program

KERNEL = "def kernel(x):\n    return x + 1\n"
CFG = {"warmup": 2, "repeat": 20}
FAKE_MEDIAN = 1e-6


def timed(source: str, entry: str = "benchmark", args: list | None = None) -> Program:
    """The harness's shape: the upload's kernel timed by `entry` from the same upload, called
    straight by the `run` instruction "timing" (as the reference client's programs do)."""
    program = Program()
    module = program.upload(id="m", kind="module", source=source)
    kernel = program.get_function(id="k", module=module, name="kernel")
    bench = program.get_function(id="bench", module=module, name=entry)
    program.return_(key="out", value=program.run(id="timing", fn=bench, args=[kernel, *(args or [1, CFG])]))
    return program


def completed(result) -> dict:
    assert result.status == "COMPLETED", result.error
    return result["out"]


def integrity(out: dict) -> dict:
    assert isinstance(out.get("integrity"), dict), out
    return out["integrity"]


def verified_and_trusted(out: dict) -> dict:
    found = integrity(out)
    assert found["verified"] is True, found
    assert found["trusted"] is True, found
    assert found["flags"] == []
    assert isinstance(found["conditions"], list)  # reported; trust is the flags' alone
    return found


# ------------------------------------------------------------------ honest
def test_honest_host_benchmark_is_verified_and_trusted_with_provenance(client):
    source = "from kcoral.builtins import benchmark\n" + KERNEL
    out = completed(client.execute(timed(source)))
    found = verified_and_trusted(out)
    assert found["altered_after_timing"] is False
    assert "record" not in found and "seal" not in found  # the client gets the checked values
    assert found["defences"] == {"sealed": True}
    assert found["conditions"] == []  # the host timer reads no machine conditions
    assert found["provenance"] == {
        "instruction_id": "timing",
        "uploads": {"m": hashlib.sha256(source.encode()).hexdigest()},
    }
    assert found["python"]["call_chain"] == {"direct": True, "engine_frame": True, "first_foreign_frame": None}
    assert found["python"]["patched"] == []
    assert "ctypes" in found["scope"]  # it says what it cannot protect
    assert out["timer"] == "host" and out["repeat"] == 20 and out["n_samples"] == 20
    assert 0 < out["latency_ms_min"] <= out["latency_ms_median"] <= out["latency_ms_max"]


def test_benchmark_called_from_the_uploads_own_function_stays_trusted(client):
    # A caller in the upload is normal; it is reported (not direct), not flagged.
    source = (
        "from kcoral.builtins import benchmark\n" + KERNEL + "def main():\n    return benchmark(kernel, 1, %r)\n" % CFG
    )
    found = verified_and_trusted(completed(client.execute(call(source))))
    chain = found["python"]["call_chain"]
    assert chain["direct"] is False and chain["engine_frame"] is True
    assert chain["first_foreign_frame"].endswith(" main") and "<uploaded:" in chain["first_foreign_frame"]
    assert found["provenance"]["instruction_id"] == "r"


def test_seal_cost_is_reported_and_small(client):
    source = "from kcoral.builtins import benchmark\n" + KERNEL
    found = integrity(completed(client.execute(timed(source))))
    assert 0 < found["python"]["check_us"] < 1000


# ------------------------------------------------------------- hand-made
FAKE_RETURNS_A_DICT = (
    f"""
import kcoral.builtins

def fake_benchmark(fn, *rest):
    return {{"latency_ms_median": {FAKE_MEDIAN}, "timer": "host",
            "integrity": {{"verified": True, "trusted": True, "flags": [], "provenance": "mine"}}}}

kcoral.builtins.__dict__["benchmark"] = fake_benchmark  # setattr is refused; the dict is not
from kcoral.builtins import benchmark
"""
    + KERNEL
)


def test_fake_benchmark_returning_a_hand_made_dict_is_not_verified(client):
    out = completed(client.execute(timed(FAKE_RETURNS_A_DICT)))
    found = integrity(out)
    assert found["verified"] is False and found["trusted"] is False
    assert found["reason"].startswith("no seal"), found
    assert "provenance" not in found  # only the server writes it
    assert out["latency_ms_median"] == FAKE_MEDIAN  # kept as returned, but marked


def test_result_without_any_integrity_is_left_alone(client):
    out = completed(client.execute(call("def main():\n    return {'latency_ms_median': 1e-6}\n")))
    assert out == {"latency_ms_median": 1e-6}


# ------------------------------------------------------------ edited after
EDITS_THE_GENUINE_RESULT = (
    f"""
import kcoral.builtins
genuine = kcoral.builtins.benchmark

def edited_benchmark(fn, *rest):
    result = genuine(fn, *rest)
    result["latency_ms_median"] = {FAKE_MEDIAN}
    result["latency_ms_min"] = {FAKE_MEDIAN}
    result["integrity"]["flags"] = []
    return result

kcoral.builtins.__dict__["benchmark"] = edited_benchmark
from kcoral.builtins import benchmark
"""
    + KERNEL
)


def test_edited_result_is_restored_from_the_record_and_reported_altered(client):
    out = completed(client.execute(timed(EDITS_THE_GENUINE_RESULT)))
    found = integrity(out)
    assert found["verified"] is True
    assert found["altered_after_timing"] is True
    assert out["latency_ms_median"] != FAKE_MEDIAN and out["latency_ms_min"] != FAKE_MEDIAN
    assert out["latency_ms_min"] <= out["latency_ms_median"]
    # The patch itself was seen at seal time, and the emptied flags are back.
    assert "patched: kcoral.builtins.benchmark" in found["flags"]
    assert found["trusted"] is False


def test_editing_without_patching_anything_is_restored_too(client):
    source = (
        "from kcoral.builtins import benchmark\n"
        + KERNEL
        + f"def main():\n    r = benchmark(kernel, 1, {CFG!r})\n    r['latency_ms_median'] = {FAKE_MEDIAN}\n"
        "    return r\n"
    )
    out = completed(client.execute(call(source)))
    found = integrity(out)
    assert found["verified"] is True and found["altered_after_timing"] is True
    assert out["latency_ms_median"] != FAKE_MEDIAN


# ------------------------------------------------------------ patched names
# kcoral.builtins.summarize (the Python statistics) is gone: both timers compute them in C++.
# Its checker is the builtin an upload would patch now ("checker tampering").
PATCHES_STATISTICS_AND_CHECKER = (
    f"""
import statistics
import kcoral.builtins

statistics.median = lambda data: {FAKE_MEDIAN}
kcoral.builtins.__dict__["check_close"] = lambda *args, **kwargs: {{"ok": True}}
from kcoral.builtins import benchmark
"""
    + KERNEL
)


def test_patched_statistics_and_checker_change_no_number_and_are_flagged(client):
    out = completed(client.execute(timed(PATCHES_STATISTICS_AND_CHECKER)))
    found = integrity(out)
    assert found["verified"] is True and found["trusted"] is False
    assert out["latency_ms_median"] != FAKE_MEDIAN  # the statistics are C++
    assert "patched: statistics.median" in found["flags"]
    assert "patched: kcoral.builtins.check_close" in found["flags"]
    assert {"statistics.median", "kcoral.builtins.check_close"} <= set(found["python"]["patched"])


def test_a_module_replaced_in_sys_modules_is_flagged(client):
    source = (
        "import sys, types\nsys.modules['math'] = types.ModuleType('math')\n"
        "from kcoral.builtins import benchmark\n" + KERNEL
    )
    found = integrity(completed(client.execute(timed(source))))
    assert "patched: math (in sys.modules)" in found["flags"], found["flags"]


def test_a_name_added_to_kcoral_builtins_is_not_a_patch(client):
    source = (
        "import kcoral.builtins\nkcoral.builtins.__dict__['summarize'] = print\n"
        "from kcoral.builtins import benchmark\n" + KERNEL
    )
    verified_and_trusted(completed(client.execute(timed(source))))


# A key whose hash collides with "benchmark" sits before it in the dict's probe order; a check
# that looked names up would call its __eq__, which puts the genuine benchmark back for the
# length of the check. The check reads the dict by iteration instead.
EQ_RESTORES_DURING_THE_CHECK = (
    """
import kcoral.builtins

d = kcoral.builtins.__dict__
genuine = d["benchmark"]

def swapped(fn, *rest):
    return genuine(lambda *a: None, *rest)

class Planted:
    armed = False

    def __hash__(self):
        return hash("benchmark")

    def __eq__(self, other):
        if Planted.armed:  # once, at the first lookup of "benchmark" after the setup
            Planted.armed = False
            d["benchmark"] = genuine
        return False

del d["benchmark"]
d[Planted()] = None
d["benchmark"] = swapped
from kcoral.builtins import benchmark
Planted.armed = True
"""
    + KERNEL
)


def test_a_planted_key_cannot_undo_a_patch_during_the_check(client):
    found = integrity(completed(client.execute(timed(EQ_RESTORES_DURING_THE_CHECK))))
    assert found["verified"] is True and found["trusted"] is False
    assert "patched: kcoral.builtins.benchmark" in found["flags"], found["flags"]


def test_assigning_to_kcoral_builtins_is_refused(client):
    source = (
        "import kcoral.builtins\ndef main():\n    try:\n        kcoral.builtins.benchmark = print\n"
        "    except AttributeError as e:\n        return str(e)\n    return 'assigned'\n"
    )
    assert "read-only" in completed(client.execute(call(source)))


def test_changing_the_worker_settings_after_start_changes_no_timer(client):
    # The timer is chosen from the worker's settings as they were when kcoral.builtins was
    # imported; they are set once per process (src/worker/process_settings.h), and the old
    # environment variable is no longer read.
    source = (
        "import os\nimport kcoral._core\nos.environ['KCORAL_WORKER_DEVICE'] = 'gpu'\n"
        "try:\n    kcoral._core.use_worker_settings(device='gpu')\nexcept RuntimeError:\n    pass\n"
        "assert kcoral._core.worker_settings().device == 'cpu'\n"
        "from kcoral.builtins import benchmark\n" + KERNEL
    )
    out = completed(client.execute(timed(source)))
    assert out["timer"] == "host"
    verified_and_trusted(out)


# ------------------------------------------------------------- call chain
SWAPS_THE_TIMED_CALLABLE = (
    """
import kcoral._core
import kcoral.builtins

def swapped_bënchmark(fn, *rest):
    return kcoral._core.host_benchmark(lambda *a: None, (), None, 20, 25.0, 100.0)

kcoral.builtins.__dict__["benchmark"] = swapped_bënchmark
from kcoral.builtins import benchmark
"""
    + KERNEL
)


def test_timer_called_by_foreign_code_is_flagged(client):
    found = integrity(completed(client.execute(timed(SWAPS_THE_TIMED_CALLABLE))))
    assert found["verified"] is True and found["trusted"] is False
    assert any(
        f.startswith("call chain: the timer was called by foreign code") and "swapped_bënchmark" in f
        for f in found["flags"]
    ), found["flags"]


GENUINE_CODE_OVER_FAKE_GLOBALS = (
    """
import types
import kcoral.builtins

fake_globals = dict(vars(kcoral.builtins))
fake_globals["_cfg_count"] = lambda cfg, count_key, budget_key, minimum: (1, 0.0)  # one quick sample
rebuilt = types.FunctionType(kcoral.builtins._host_benchmark.__code__, fake_globals)

def benchmark(fn, *args):
    return rebuilt(fn, args, {})
"""
    + KERNEL
)


def test_genuine_code_run_over_other_globals_counts_as_foreign(client):
    out = completed(client.execute(timed(GENUINE_CODE_OVER_FAKE_GLOBALS, args=[1])))
    found = integrity(out)
    assert out["repeat"] == 1  # the rebuilt function did run the timer
    assert found["verified"] is True and found["trusted"] is False
    assert any(
        f.startswith("call chain: the timer was called by foreign code") and "_host_benchmark" in f
        for f in found["flags"]
    ), found["flags"]


# --------------------------------------------------------------- tracing
REWRITES_THROUGH_A_TRACE = f"""
import sys
from kcoral.builtins import benchmark as genuine
{KERNEL}
def tracer(frame, event, arg):
    if event == "return" and frame.f_code is genuine.__code__ and isinstance(arg, dict):
        arg["latency_ms_median"] = {FAKE_MEDIAN}
    return tracer

def main():
    sys.settrace(tracer)
    try:
        return genuine(kernel, 1, {CFG!r})
    finally:
        sys.settrace(None)
"""


def test_trace_function_during_the_call_is_flagged_and_its_rewrite_undone(client):
    out = completed(client.execute(call(REWRITES_THROUGH_A_TRACE)))
    found = integrity(out)
    assert found["verified"] is True and found["trusted"] is False
    assert found["python"]["trace"] is True
    assert any("trace function" in f and "was set when the timer started" in f for f in found["flags"])
    assert any("trace function" in f and "while sealing" in f for f in found["flags"])
    assert found["altered_after_timing"] is True
    assert out["latency_ms_median"] != FAKE_MEDIAN


# ---------------------------------------------------------------- replay
# Which process ran a request: pids repeat across sandboxes (each worker is pid 2 of its own
# PID namespace), so a process marks itself with a random token the first time it is asked.
PROCESS_TOKEN = """
import os, sys

def process_token():
    return sys.__dict__.setdefault("kcoral_test_token", os.urandom(8).hex())
"""

SAVES_OR_REPLAYS = (
    "from kcoral.builtins import benchmark\n"
    + KERNEL
    + PROCESS_TOKEN
    + f"""
def save():
    sys.kcoral_saved = benchmark(kernel, 1, {CFG!r})
    return [process_token(), sys.kcoral_saved]

def replay():
    return [process_token(), sys.kcoral_saved]
"""
)


def test_record_saved_by_one_request_and_returned_by_the_next_is_refused(make_server):
    # One seat and unlimited reuse: the second request runs in the same process, with the same key.
    server = make_server("--num-workers", "1", "--max-requests-per-worker", "0")
    with Client(server.url) as c:
        first_process, first = completed(c.execute(call(SAVES_OR_REPLAYS, name="save")))
        second_process, second = completed(c.execute(call(SAVES_OR_REPLAYS, name="replay")))
    assert first_process == second_process, "the worker was not reused"
    assert integrity(first)["verified"] is True
    found = integrity(second)
    assert found["verified"] is False and found["trusted"] is False
    assert found["reason"].startswith("another request's record"), found


EXPORTS_OR_IMPORTS = (
    "from kcoral.builtins import benchmark\nimport json\n"
    + KERNEL
    + PROCESS_TOKEN
    + f"""
def export():
    return [process_token(), json.dumps(benchmark(kernel, 1, {CFG!r}))]  # a string keeps record and seal

def present(text):
    return [process_token(), json.loads(text)]
"""
)


def test_record_sealed_by_another_worker_is_refused(client):
    process, text = completed(client.execute(call(EXPORTS_OR_IMPORTS, name="export")))
    assert "seal" in json.loads(text)["integrity"]
    other_process, presented = completed(client.execute(call(EXPORTS_OR_IMPORTS, args=[text], name="present")))
    assert other_process != process  # one request per worker process (the default)
    found = integrity(presented)
    assert found["verified"] is False
    assert found["reason"].startswith("bad seal"), found


@pytest.mark.parametrize("edit", ["record", "seal"])
def test_record_or_seal_changed_inside_the_worker_is_refused(client, edit):
    source = (
        "from kcoral.builtins import benchmark\n" + KERNEL + f"def main():\n    r = benchmark(kernel, 1, {CFG!r})\n"
        f"    x = r['integrity'][{edit!r}]\n"
        f"    r['integrity'][{edit!r}] = x[:-2] + ('1' if x[-2] != '1' else '2') + x[-1]\n    return r\n"
    )
    found = integrity(completed(client.execute(call(source))))
    assert found["verified"] is False
    assert found["reason"].startswith("bad seal"), found
