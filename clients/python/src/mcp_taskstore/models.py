"""Plain Python views of the service's messages, independent of protobuf."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any


class TaskStatus(enum.IntEnum):
    """Mirror of ``mcp.tasks.v1.TaskStatus``; values equal the proto numbers."""

    WORKING = 1
    INPUT_REQUIRED = 2
    COMPLETED = 3
    FAILED = 4
    CANCELLED = 5

    @property
    def is_terminal(self) -> bool:
        return self in (TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELLED)

    @property
    def mcp_name(self) -> str:
        """The MCP spelling (``working``, ``input_required``, ...)."""
        return self.name.lower()

    @classmethod
    def from_mcp(cls, name: str) -> TaskStatus:
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(f"unknown MCP task status {name!r}") from None


@dataclass(frozen=True)
class TaskInfo:
    """A task as the service reports it."""

    task_id: str
    status: TaskStatus
    status_message: str | None
    created_at: datetime
    last_updated_at: datetime
    # None: kept until deleted.
    ttl: timedelta | None
    poll_interval: timedelta | None
    session_id: str | None = None
    tool: str | None = None


@dataclass(frozen=True)
class TaskResult:
    """A terminal task's stored result (GetTaskResult)."""

    status: TaskStatus
    result_json: str
    task: TaskInfo

    def result(self) -> Any:
        """The result decoded from JSON."""
        import json

        return json.loads(self.result_json)


@dataclass(frozen=True)
class TaskPage:
    """One page of ListTasks; ``next_cursor`` is None on the last page."""

    tasks: list[TaskInfo]
    next_cursor: str | None


@dataclass(frozen=True)
class ServedTool:
    """A tool that workers serve now (ListTools)."""

    name: str
    workers: int
    slots: int
    busy: int
    last_seen_at: datetime | None
    # What the tool is, as its workers' latest report describes it (None: undescribed).
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    # "optional", "required" or "forbidden" (MCP execution.taskSupport).
    task_support: str = "optional"


@dataclass(frozen=True)
class InputRequest:
    """A question a task's tool asked (an MCP input request), open or answered.

    ``request`` is the MCP request as the tool sent it:
    ``{"method": "elicitation/create" | "sampling/createMessage" | "roots/list",
    "params": {...}}``. ``answer`` is the caller's result (an ``ElicitResult``,
    ``CreateMessageResult`` or ``ListRootsResult``) as it was given; None (and
    ``answered_at`` None) while the question is open.
    """

    key: str
    request: dict[str, Any]
    asked_at: datetime
    answer: dict[str, Any] | None = None
    answered_at: datetime | None = None

    @property
    def method(self) -> str:
        """The MCP method the question asks with (``elicitation/create``, ...)."""
        return str(self.request.get("method", ""))

    @property
    def is_open(self) -> bool:
        return self.answer is None


@dataclass(frozen=True)
class AnsweredInputRequests:
    """What ``answer_input_requests`` did.

    ``task`` is the task after the answers (WORKING once no question is open);
    ``taken`` the keys whose answers were stored; ``ignored`` those whose
    answers changed nothing (unknown keys, or answered before).
    """

    task: TaskInfo
    taken: list[str]
    ignored: list[str]


@dataclass(frozen=True)
class Hold:
    """What ``HoldTask`` answered: the lease to renew (and pass with reports),
    or, with ``keep_running`` False, that the tool must stop (``reason``)."""

    lease_token: str
    lease_duration: timedelta
    keep_running: bool
    reason: str = ""


@dataclass(frozen=True)
class Dispatch:
    """Run the task on a worker. ``tool`` unset: the request's ``params.name``.

    ``start_at`` (not before this time, timezone-aware) or ``start_after``
    (this long after its creation) makes the task wait, ``working``, until
    then. ``priority`` (0 to 9) puts it ahead of lower ones in its tool's
    backlog while the tool's workers are busy.
    """

    tool: str | None = None
    max_attempts: int | None = None
    start_at: datetime | None = None
    start_after: timedelta | None = None
    priority: int | None = None


@dataclass(frozen=True)
class TlsConfig:
    """PEM material for TLS; ``cert``+``key`` together enable mutual TLS."""

    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
