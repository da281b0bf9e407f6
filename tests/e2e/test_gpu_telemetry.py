"""kcoral._native.gpu_snapshot where there is no GPU (CI and development machines): the
telemetry says `unavailable` instead of failing the import or crashing. On the GPU machine,
tests/gpu/test_integrity_natives.py reads real snapshots.
"""

import shutil
import subprocess

import pytest

_native = pytest.importorskip("kcoral._native", reason="kcoral._native is not built here")


def _has_gpu() -> bool:
    return (
        shutil.which("nvidia-smi") is not None
        and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    )


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU")
@pytest.mark.parametrize("device", [None, 0])
def test_without_a_gpu_the_snapshot_is_unavailable(device):
    with pytest.raises(_native.UnavailableError) as raised:
        _native.gpu_snapshot(device)
    message = str(raised.value)
    # No driver: either NVML cannot be loaded or CUDA finds no device, whichever is asked first.
    assert "NVML is unavailable" in message or "cudaError" in message, message


def test_the_snapshot_type_cannot_be_made_from_python():
    with pytest.raises(TypeError):
        _native.GpuSnapshot()
