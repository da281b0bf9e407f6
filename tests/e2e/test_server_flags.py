"""Server flags that apply to GPU servers only are refused on a CPU server,
by name, instead of being accepted and ignored."""

import subprocess
import sys

import pytest


def server(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kcoral", "server", *flags], capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("flag,value", [("--housekeeping", "beside-spans"), ("--cuda-max-connections", "2")])
def test_gpu_only_flags_are_refused_on_a_cpu_server(flag, value):
    run = server("--device", "cpu", flag, value)
    assert run.returncode == 2
    assert f"{flag} applies to GPU servers" in run.stderr


@pytest.mark.parametrize("flag,value", [("--housekeeping", "sometimes"), ("--cuda-max-connections", "0")])
def test_bad_values_name_the_flag(flag, value):
    run = server("--device", "gpu", flag, value)
    assert run.returncode != 0
    assert flag in run.stderr
