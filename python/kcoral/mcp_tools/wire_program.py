"""The run tool's program, in the protocol's JSON (spec/protocol.md §2), rebuilt with
kcoral.Program's builders so it is checked as any client's program is.

Blob bytes cannot travel inline in JSON, so an upload of bytes or a library names them by
"blob": the SHA-256 of a library `compile` built in this session, or gives "value_base64"."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from kcoral.program import Program, Register

from .libraries import Libraries
from .tool_errors import tool_error

_FIX = (
    'instructions like {"op": "upload", "id": "m", "kind": "module", "source": "def main(): return 1"}, '
    '{"op": "get_function", "id": "f", "module": {"$ref": "m"}, "name": "main"}, '
    '{"op": "run", "id": "r", "fn": {"$ref": "f"}, "args": []}, {"op": "return", "key": "out", "value": {"$ref": "r"}}'
)


def _blob(instruction: dict[str, Any], field: str, libraries: Libraries) -> tuple[bytes, str | None]:
    if "value_base64" in instruction:
        try:
            return base64.b64decode(instruction["value_base64"], validate=True), None
        except (binascii.Error, TypeError) as exc:
            raise tool_error(f"{field}.value_base64 is not base64: {exc}", field=f"{field}.value_base64") from None
    digest = instruction.get("blob")
    data = libraries.get(digest) if isinstance(digest, str) else None
    if data is None:
        raise tool_error(
            f"{field}.blob {digest!r} is not a library compiled in this session",
            field=f"{field}.blob",
            fix="give the library_sha256 that `compile` answered, or the bytes as value_base64",
        )
    return data, digest


def _upload(program: Program, instruction: dict[str, Any], field: str, libraries: Libraries) -> None:
    kind = instruction.get("kind")
    common = {"id": instruction.get("id")}
    if kind == "module":
        program.upload(**common, kind="module", source=instruction.get("source"), language=instruction.get("language"))
    elif kind in ("bytes", "library"):
        data, digest = _blob(instruction, field, libraries)
        program.upload(**common, kind=kind, value=data, sha256=digest)
    elif kind == "tensor":
        data, _ = _blob(instruction, field, libraries)
        program.upload(
            **common, kind="tensor", value=data, dtype=instruction.get("dtype"), shape=instruction.get("shape")
        )
    else:
        raise tool_error(
            f"{field}.kind {kind!r} is not known", field=f"{field}.kind", fix="module, tensor, bytes or library"
        )


def program_from_json(wire: Any, libraries: Libraries) -> Program:
    instructions = wire.get("instructions") if isinstance(wire, dict) else wire
    if not isinstance(instructions, list) or not instructions:
        raise tool_error(
            'program must be a list of instructions (or {"instructions": [...]})', field="program", fix=_FIX
        )
    program = Program()
    for index, instruction in enumerate(instructions):
        field = f"program.instructions[{index}]"
        if not isinstance(instruction, dict):
            raise tool_error(f"{field} must be an object", field=field, fix=_FIX)
        op = instruction.get("op")
        try:
            if op == "upload":
                _upload(program, instruction, field, libraries)
            elif op == "get_function":
                program.get_function(
                    id=instruction.get("id"),
                    module=instruction.get("module"),
                    name=instruction.get("name"),
                    cpu_only=instruction.get("cpu_only", False),
                )
            elif op == "run":
                fn = program_register(instruction.get("fn"), field + ".fn")
                program.run(id=instruction.get("id"), fn=fn, args=instruction.get("args", []))
            elif op == "return" and "kind" in instruction:
                returner = program.return_file if instruction["kind"] == "file" else program.return_folder
                returner(key=instruction.get("key"), path=instruction.get("path"))
            elif op == "return":
                program.return_(key=instruction.get("key"), value=instruction.get("value"))
            else:
                raise tool_error(
                    f"{field}.op {op!r} is not known", field=f"{field}.op", fix="upload, get_function, run or return"
                )
        except (TypeError, ValueError) as exc:
            raise tool_error(f"{field}: {exc}", field=field, fix=_FIX) from None
    return program


def program_register(reference: Any, field: str):
    """A {"$ref": id} as the Register Program.run wants for fn."""
    if isinstance(reference, dict) and isinstance(reference.get("$ref"), str):
        return Register(reference["$ref"])
    raise tool_error(f'{field} must be a reference like {{"$ref": "f"}}', field=field, fix=_FIX)
