"""KCoral: remote GPU-kernel evaluation.

The public names are imported lazily, so that ``import kcoral.errors`` (or
``kcoral.builtins``) inside a worker does not pull in httpx or numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "AsyncClient": "kcoral.async_client",
    "Client": "kcoral.client",
    "Program": "kcoral.program",
    "Register": "kcoral.program",
    "ProgramResult": "kcoral.result",
    "ReturnedFile": "kcoral.artifacts",
    "ReturnedFolder": "kcoral.artifacts",
    "KCoralError": "kcoral.errors",
    "TransportError": "kcoral.errors",
    "ProtocolError": "kcoral.errors",
    "RemoteExecutionError": "kcoral.errors",
    "RemoteFunction": "kcoral.remote_function",
}

__all__ = sorted(_EXPORTS) + ["__version__"]

if TYPE_CHECKING:  # pragma: no cover
    from .artifacts import ReturnedFile, ReturnedFolder
    from .async_client import AsyncClient
    from .client import Client
    from .errors import KCoralError, ProtocolError, RemoteExecutionError, TransportError
    from .program import Program, Register
    from .remote_function import RemoteFunction
    from .result import ProgramResult


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'kcoral' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
