"""Host tensors: uploaded bytes to arrays and returned arrays to bytes.

Wire dtypes are the twelve torch-style names of spec/protocol.md §2.4; bytes
are little-endian and C-contiguous.
"""

from kcoral._worker.errors import InstructionFailure

WIRE_DTYPES = (
    "bool",
    "uint8",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
)


def _numpy_dtype(name: str):
    import numpy as np

    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            import ml_dtypes
        except ImportError:
            raise InstructionFailure("unavailable", f"dtype {name} needs ml_dtypes on the server") from None
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name).newbyteorder("<")


def _torch():
    try:
        import torch

        return torch
    except ImportError:
        return None


def host_tensor(blob, dtype: str, shape: list):
    """A writable host tensor over a copy-on-write mapping of the blob: no
    copy up front, and the program's writes never reach the blob."""
    import numpy as np

    array = np.frombuffer(blob.private(), dtype=_numpy_dtype(dtype)).reshape(shape)
    torch = _torch()
    if torch is not None and dtype not in ("float8_e4m3fn", "float8_e5m2", "bfloat16"):
        return torch.from_numpy(array)
    return array


def export_host_tensor(value):
    """(dtype, shape, bytes) for a numpy array or torch tensor, else None."""
    module = type(value).__module__
    if module.startswith("torch") and type(value).__name__ in ("Tensor", "Parameter"):
        tensor = value.detach().cpu().contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if dtype not in WIRE_DTYPES:
            raise InstructionFailure("serialization", f"cannot return a tensor of dtype {dtype}")
        import torch

        raw = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()  # little-endian hosts only
        return dtype, list(tensor.shape), raw
    if module == "numpy" and type(value).__name__ == "ndarray":
        import numpy as np

        dtype = value.dtype.name
        if dtype not in WIRE_DTYPES:
            raise InstructionFailure("serialization", f"cannot return an array of dtype {dtype}")
        array = np.ascontiguousarray(value)
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        return dtype, list(array.shape), array.tobytes()
    return None
