"""Conversions between protobuf messages and the models of this package."""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from typing import Any, cast

from google.protobuf import duration_pb2

from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore.models import (
    AnsweredInputRequests,
    InputRequest,
    ServedTool,
    TaskInfo,
    TaskPage,
    TaskResult,
    TaskStatus,
)


def duration(value: timedelta) -> duration_pb2.Duration:
    d = duration_pb2.Duration()
    d.FromTimedelta(value)
    return d


def status_to_proto(status: TaskStatus) -> pb.TaskStatus:
    # Same numbers on both sides (TaskStatus mirrors the proto enum).
    return cast(pb.TaskStatus, int(status))


def task_from_proto(msg: pb.Task) -> TaskInfo:
    return TaskInfo(
        task_id=msg.task_id,
        status=TaskStatus(msg.status),
        status_message=msg.status_message if msg.HasField("status_message") else None,
        created_at=msg.created_at.ToDatetime(tzinfo=timezone.utc),
        last_updated_at=msg.last_updated_at.ToDatetime(tzinfo=timezone.utc),
        ttl=msg.ttl.ToTimedelta() if msg.HasField("ttl") else None,
        poll_interval=msg.poll_interval.ToTimedelta() if msg.HasField("poll_interval") else None,
        session_id=msg.session_id if msg.HasField("session_id") else None,
        tool=msg.tool if msg.HasField("tool") else None,
    )


def result_from_proto(msg: pb.GetTaskResultResponse) -> TaskResult:
    return TaskResult(status=TaskStatus(msg.status), result_json=msg.result_json, task=task_from_proto(msg.task))


def page_from_proto(msg: pb.ListTasksResponse) -> TaskPage:
    return TaskPage(
        tasks=[task_from_proto(t) for t in msg.tasks],
        next_cursor=msg.next_cursor if msg.HasField("next_cursor") else None,
    )


_TASK_SUPPORT = {2: "required", 3: "forbidden"}


def tool_from_proto(msg: pb.ServedTool) -> ServedTool:
    described = msg.HasField("description")
    info = msg.description
    return ServedTool(
        name=msg.name,
        workers=msg.workers,
        slots=msg.slots,
        busy=msg.busy,
        last_seen_at=msg.last_seen_at.ToDatetime(tzinfo=timezone.utc) if msg.HasField("last_seen_at") else None,
        title=(info.title or None) if described else None,
        description=(info.description or None) if described else None,
        input_schema=json.loads(info.input_schema_json) if described and info.input_schema_json else None,
        task_support=_TASK_SUPPORT.get(int(info.task_support), "optional"),
    )


def input_request_from_proto(msg: pb.InputRequest) -> InputRequest:
    answer: dict[str, Any] | None = json.loads(msg.answer_json) if msg.HasField("answer_json") else None
    return InputRequest(
        key=msg.key,
        request=json.loads(msg.request_json),
        asked_at=msg.asked_at.ToDatetime(tzinfo=timezone.utc),
        answer=answer,
        answered_at=msg.answered_at.ToDatetime(tzinfo=timezone.utc) if msg.HasField("answered_at") else None,
    )


def answered_from_proto(msg: pb.AnswerInputRequestsResponse) -> AnsweredInputRequests:
    return AnsweredInputRequests(task=task_from_proto(msg.task), taken=list(msg.taken), ignored=list(msg.ignored))
