"""Conversions between this package's models and the MCP SDK's types."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from mcp.types import CallToolResult, Result, Task

from mcp_taskstore.models import TaskInfo

_MS = timedelta(milliseconds=1)


def millis(value: timedelta | None) -> int | None:
    return None if value is None else int(value // _MS)


def to_mcp_task(info: TaskInfo) -> Task:
    return Task(
        taskId=info.task_id,
        status=info.status.mcp_name,  # type: ignore[arg-type]  # the literal set matches TaskStatus
        statusMessage=info.status_message,
        createdAt=info.created_at,
        lastUpdatedAt=info.last_updated_at,
        ttl=millis(info.ttl),
        pollInterval=millis(info.poll_interval),
    )


def result_to_json(result: Result) -> str:
    # The same shape the SDK puts on the wire for tasks/result.
    return json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


def result_from_json(text: str) -> Result:
    """Decode a stored result.

    The service keeps JSON only, not the Python class that was stored. A
    value with a ``content`` list is a tool call's result (what workers and
    ``tools/call`` tasks store), so it comes back as CallToolResult; anything
    else comes back as a generic Result carrying the fields as extras.
    """
    data: Any = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("stored result is not a JSON object")
    if isinstance(data.get("content"), list):
        return CallToolResult.model_validate(data)
    return Result.model_validate(data)


def failure_reason(result: Result, limit: int = 1024) -> str | None:
    """A status message for a failed tool result: its first text, shortened."""
    for block in getattr(result, "content", None) or []:
        text = getattr(block, "text", None)
        if isinstance(text, str) and text:
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return None
