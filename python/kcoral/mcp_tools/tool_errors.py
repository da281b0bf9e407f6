"""Tool errors an agent can act on: each names the field at fault and the fix, as one JSON object
in the error's text (MCP carries a tool's failure as text with isError set; the SDK puts
"Error executing tool NAME: " before it).

A refusal from the server keeps what the server said: its HTTP status, kind and message, and a
429's Retry-After, so an agent waits as long as the server asked rather than guessing."""

from __future__ import annotations

import json
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from kcoral.errors import KCoralError, ProtocolError, TransportError


def tool_error(message: str, *, field: str | None = None, fix: str | None = None, **details: Any) -> ToolError:
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    if fix is not None:
        body["fix"] = fix
    body.update({key: value for key, value in details.items() if value is not None})
    return ToolError(json.dumps(body, indent=1, ensure_ascii=False, default=str))


def _retry_after_seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


# The setting at fault, where a refusal is about one rather than about timing or size.
_FIELDS = {401: "KCORAL_API_KEY", 403: "gpu_count"}

# What an agent can do about each refusal of the HTTP API (docs/deploy.md, spec/protocol.md §3.3).
_FIXES = {
    401: "set KCORAL_API_KEY (in the MCP server's environment) to a key the server accepts: `kcoral keys new TENANT`",
    403: "this key's role or limits do not allow it; ask the server's operator, or use less (gpu_count)",
    413: "the request is larger than this key's max_request_bytes: send smaller inputs or fewer uploads",
    429: "over this key's quota: wait retry_after_seconds and call again (the `usage` tool shows what is left)",
    503: "the server is busy or has no quorum: wait retry_after_seconds (or a few seconds) and call again",
}


def from_client_error(error: Exception, what: str) -> ToolError:
    """A kcoral.Client exception, as a tool error that says what happened and what to do."""
    if isinstance(error, KCoralError):
        fix = _FIXES.get(error.status_code)
        if error.status_code == 400:
            fix = "the server refused the program: the message names what is wrong; fix that argument"
        return tool_error(
            f"{what}: the KCoral server answered HTTP {error.status_code}: {error.message}",
            field=_FIELDS.get(error.status_code),
            fix=fix or "see the server's message",
            http_status=error.status_code,
            kind=error.kind,
            retry_after_seconds=_retry_after_seconds(error.retry_after),
            request_id=error.request_id,
        )
    if isinstance(error, TransportError):
        return tool_error(
            f"{what}: no answer from the KCoral server: {error}",
            field="--url",
            fix="check that the server named by `kcoral mcp --url` is up and reachable, then call again",
        )
    if isinstance(error, ProtocolError):
        return tool_error(f"{what}: the server's answer was malformed: {error}", fix="report it with the server's log")
    return tool_error(f"{what}: {type(error).__name__}: {error}")
