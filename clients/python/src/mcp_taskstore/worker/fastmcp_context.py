"""A stand-in for FastMCP's ``Context`` in a tool moved onto the fleet.

On a worker there is no MCP session: what a FastMCP tool does through its
``ctx`` goes to the task instead. ``report_progress`` and the log methods
set the task's status message (watchers and ``tasks/get`` see it);
``elicit`` asks the task's caller a question (keys ``elicit-1``,
``elicit-2``, ... in the order asked, so a run after a crash finds its
answers). Anything else (``read_resource``, ``session``, sampling) is not
available on the fleet and raises ``ToolFailure``.
"""

from __future__ import annotations

from typing import Any

from mcp.server.elicitation import (
    AcceptedElicitation,
    CancelledElicitation,
    DeclinedElicitation,
    _validate_elicitation_schema,
)
from pydantic import BaseModel

from mcp_taskstore.worker.context import QuestionDeclined, ToolContext
from mcp_taskstore.worker.failures import ToolFailure


class FleetFastMCPContext:
    """What a FastMCP tool's ``Context`` parameter gets on a worker."""

    def __init__(self, context: ToolContext) -> None:
        self.fleet = context
        self._asked = 0

    @property
    def request_id(self) -> str:
        return self.fleet.task_id

    @property
    def client_id(self) -> None:
        return None

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        await self.fleet.report_progress(progress, total, message)

    async def log(self, level: str, message: str, *, logger_name: str | None = None, **_: Any) -> None:
        await self.fleet.progress(message)

    async def debug(self, message: str, **extra: Any) -> None:
        await self.log("debug", message)

    async def info(self, message: str, **extra: Any) -> None:
        await self.log("info", message)

    async def warning(self, message: str, **extra: Any) -> None:
        await self.log("warning", message)

    async def error(self, message: str, **extra: Any) -> None:
        await self.log("error", message)

    async def elicit(self, message: str, schema: type[BaseModel]) -> Any:
        _validate_elicitation_schema(schema)
        self._asked += 1
        try:
            content = await self.fleet.elicit(f"elicit-{self._asked}", message, schema.model_json_schema())
        except QuestionDeclined as declined:
            if declined.answer.get("action") == "cancel":
                return CancelledElicitation()
            return DeclinedElicitation()
        return AcceptedElicitation(data=schema.model_validate(content))

    def __getattr__(self, name: str) -> Any:
        raise ToolFailure(f"Context.{name} is not available to a tool running on the fleet")
