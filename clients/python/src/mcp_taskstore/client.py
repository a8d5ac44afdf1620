"""Typed async client of the whole ``mcp.tasks.v1.TaskStore`` API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterable, Mapping
from datetime import timedelta
from typing import Any, Final, TypeVar

import grpc

from mcp_taskstore import convert
from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore._proto import task_store_pb2_grpc as pb_grpc
from mcp_taskstore.channel import ClientOptions, open_channel
from mcp_taskstore.errors import translate
from mcp_taskstore.models import (
    AnsweredInputRequests,
    Dispatch,
    Hold,
    InputRequest,
    ServedTool,
    TaskInfo,
    TaskPage,
    TaskResult,
    TaskStatus,
    TlsConfig,
)

_T = TypeVar("_T")


class _Default:
    """Marks 'use the client's default deadline' (None means no deadline)."""


DEFAULT: Final = _Default()
Timeout = float | None | _Default


def _json_text(value: str | Mapping[str, Any]) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


class TaskStoreClient:
    """Async client of the taskstore service.

    Every method maps to one RPC and raises a ``TaskStoreError`` subclass
    (``NotFoundError``, ``FailedPreconditionError``, ...) on failure. The
    channel is opened lazily on the running event loop: grpc.aio channels
    cannot move between loops, so a client used from a new loop (as pytest
    does per test) gets a fresh channel there.
    """

    def __init__(
        self,
        endpoint: str | ClientOptions,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        deadline: float | None = 30.0,
        tenant: str | None = None,
    ) -> None:
        if isinstance(endpoint, ClientOptions):
            self.options = endpoint
        else:
            # ClientOptions checks the tenant (or TASKSTORE_TENANT) here, at construction.
            self.options = ClientOptions(endpoint=endpoint, token=token, tls=tls, deadline=deadline, tenant=tenant)
        self.options.target_and_security()  # validate early, before the first call
        self._channel: grpc.aio.Channel | None = None
        self._stub: pb_grpc.TaskStoreStub | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- plumbing -----------------------------------------------------------

    def _get_stub(self) -> pb_grpc.TaskStoreStub:
        loop = asyncio.get_running_loop()
        if self._stub is None or self._loop is not loop or self._loop.is_closed():
            # The previous loop's channel cannot be closed from here; it is
            # released with that loop.
            self._channel = open_channel(self.options)
            self._stub = pb_grpc.TaskStoreStub(self._channel)
            self._loop = loop
        return self._stub

    def _timeout(self, timeout: Timeout) -> float | None:
        return self.options.deadline if isinstance(timeout, _Default) else timeout

    async def _unary(self, method: str, request: Any, timeout: Timeout = DEFAULT) -> Any:
        rpc = getattr(self._get_stub(), method)
        try:
            return await rpc(request, timeout=self._timeout(timeout), metadata=self.options.metadata())
        except grpc.aio.AioRpcError as error:
            raise translate(error) from None

    async def close(self) -> None:
        """Close the channel. The client reopens one if used again."""
        channel, self._channel, self._stub = self._channel, None, None
        if channel is not None and self._loop is asyncio.get_running_loop():
            await channel.close()
        self._loop = None

    async def __aenter__(self) -> TaskStoreClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the API ------------------------------------------------------------

    async def create_task(
        self,
        *,
        request_json: str | Mapping[str, Any],
        request_id: int | str,
        task_id: str | None = None,
        session_id: str | None = None,
        ttl: timedelta | None = None,
        no_expiry: bool = False,
        poll_interval: timedelta | None = None,
        dispatch: Dispatch | None = None,
        idempotency_key: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> TaskInfo:
        """Create a WORKING task; with ``dispatch`` a worker runs it.

        With ``idempotency_key`` the create is safe to retry: while the task
        first created with the key lives (and for the service's idempotency
        retention), the same create returns that task; the key with another
        request raises FailedPreconditionError.
        """
        request = pb.CreateTaskRequest(
            task_id=task_id,
            session_id=session_id,
            request_id_json=json.dumps(request_id),
            request_json=_json_text(request_json),
            no_expiry=no_expiry,
            idempotency_key=idempotency_key,
        )
        if ttl is not None:
            request.ttl.CopyFrom(convert.duration(ttl))
        if poll_interval is not None:
            request.poll_interval.CopyFrom(convert.duration(poll_interval))
        if dispatch is not None:
            request.dispatch.CopyFrom(
                pb.Dispatch(tool=dispatch.tool, max_attempts=dispatch.max_attempts, priority=dispatch.priority)
            )
            if dispatch.start_at is not None:
                request.dispatch.start_at.FromDatetime(dispatch.start_at)
            if dispatch.start_after is not None:
                request.dispatch.start_after.CopyFrom(convert.duration(dispatch.start_after))
        return convert.task_from_proto(await self._unary("CreateTask", request, timeout))

    async def get_task(self, task_id: str, *, session_id: str | None = None, timeout: Timeout = DEFAULT) -> TaskInfo:
        msg = await self._unary("GetTask", pb.GetTaskRequest(task_id=task_id, session_id=session_id), timeout)
        return convert.task_from_proto(msg)

    async def update_task_status(
        self,
        task_id: str,
        status: TaskStatus,
        *,
        status_message: str | None = None,
        session_id: str | None = None,
        lease_token: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> TaskInfo:
        """Move a task along its lifecycle; ``status_message`` None clears it."""
        request = pb.UpdateTaskStatusRequest(
            task_id=task_id,
            status=convert.status_to_proto(status),
            status_message=status_message,
            session_id=session_id,
            lease_token=lease_token,
        )
        return convert.task_from_proto(await self._unary("UpdateTaskStatus", request, timeout))

    async def store_task_result(
        self,
        task_id: str,
        result_json: str | Mapping[str, Any],
        *,
        status: TaskStatus = TaskStatus.COMPLETED,
        status_message: str | None = None,
        session_id: str | None = None,
        lease_token: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> TaskInfo:
        """Store the result and move the task to ``status`` (COMPLETED/FAILED) at once."""
        request = pb.StoreTaskResultRequest(
            task_id=task_id,
            status=convert.status_to_proto(status),
            result_json=_json_text(result_json),
            status_message=status_message,
            session_id=session_id,
            lease_token=lease_token,
        )
        return convert.task_from_proto(await self._unary("StoreTaskResult", request, timeout))

    async def get_task_result(
        self,
        task_id: str,
        *,
        session_id: str | None = None,
        wait: bool = False,
        timeout: Timeout = DEFAULT,
    ) -> TaskResult:
        """The stored result; with ``wait``, first block until the task is terminal.

        A wait is bounded by ``timeout`` (pass ``None`` to wait as long as the
        server allows) and by the server's longest wait.
        """
        if wait and isinstance(timeout, _Default):
            timeout = None
        request = pb.GetTaskResultRequest(task_id=task_id, session_id=session_id, wait=wait)
        return convert.result_from_proto(await self._unary("GetTaskResult", request, timeout))

    async def list_tasks(
        self,
        *,
        cursor: str | None = None,
        session_id: str | None = None,
        page_size: int | None = None,
        statuses: Iterable[TaskStatus] = (),
        tool: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> TaskPage:
        """One page of tasks, oldest first."""
        request = pb.ListTasksRequest(
            cursor=cursor,
            session_id=session_id,
            page_size=page_size,
            statuses=[convert.status_to_proto(s) for s in statuses],
            tool=tool,
        )
        return convert.page_from_proto(await self._unary("ListTasks", request, timeout))

    async def iter_tasks(
        self,
        *,
        session_id: str | None = None,
        page_size: int | None = None,
        statuses: Iterable[TaskStatus] = (),
        tool: str | None = None,
    ) -> AsyncIterator[TaskInfo]:
        """Every task, following cursors page by page."""
        wanted = list(statuses)
        cursor: str | None = None
        while True:
            page = await self.list_tasks(
                cursor=cursor, session_id=session_id, page_size=page_size, statuses=wanted, tool=tool
            )
            for task in page.tasks:
                yield task
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def watch_task(
        self, task_id: str, *, session_id: str | None = None, timeout: float | None = None
    ) -> AsyncIterator[TaskInfo]:
        """The task now, then after every change; ends once it is terminal."""
        call = self._get_stub().WatchTask(
            pb.WatchTaskRequest(task_id=task_id, session_id=session_id),
            timeout=timeout,
            metadata=self.options.metadata(),
        )
        try:
            async for msg in call:
                yield convert.task_from_proto(msg)
        except grpc.aio.AioRpcError as error:
            raise translate(error) from None
        finally:
            call.cancel()

    async def cancel_task(self, task_id: str, *, session_id: str | None = None, timeout: Timeout = DEFAULT) -> TaskInfo:
        """Cancel; a terminal task comes back unchanged."""
        msg = await self._unary("CancelTask", pb.CancelTaskRequest(task_id=task_id, session_id=session_id), timeout)
        return convert.task_from_proto(msg)

    async def delete_task(self, task_id: str, *, session_id: str | None = None, timeout: Timeout = DEFAULT) -> None:
        """Delete a task and its result, whatever its status."""
        await self._unary("DeleteTask", pb.DeleteTaskRequest(task_id=task_id, session_id=session_id), timeout)

    async def cleanup_expired(self, *, timeout: Timeout = DEFAULT) -> int:
        msg = await self._unary("CleanupExpired", pb.CleanupExpiredRequest(), timeout)
        return int(msg.deleted)

    async def list_tools(self, *, timeout: Timeout = DEFAULT) -> list[ServedTool]:
        msg = await self._unary("ListTools", pb.ListToolsRequest(), timeout)
        return [convert.tool_from_proto(t) for t in msg.tools]

    async def list_input_requests(
        self, task_id: str, *, session_id: str | None = None, timeout: Timeout = DEFAULT
    ) -> list[InputRequest]:
        """The questions (MCP input requests) the task's tool asked, open and answered, in the order asked.

        A question is open while its ``answer`` is None; the task is
        INPUT_REQUIRED while any is.
        """
        request = pb.ListInputRequestsRequest(task_id=task_id, session_id=session_id)
        msg = await self._unary("ListInputRequests", request, timeout)
        return [convert.input_request_from_proto(r) for r in msg.input_requests]

    async def answer_input_requests(
        self,
        task_id: str,
        answers: Mapping[str, str | Mapping[str, Any]],
        *,
        session_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> AnsweredInputRequests:
        """Answer open questions by key.

        Each answer is the MCP result its question asks for (an
        ``ElicitResult`` such as ``{"action": "accept", "content": {...}}``, a
        ``CreateMessageResult`` or a ``ListRootsResult``), as a mapping or JSON
        text. Answers to unknown or already answered keys change nothing and
        come back in ``ignored``. A task waiting without a worker is dispatched
        again once its last question is answered. A finished task raises
        ``FailedPreconditionError``.
        """
        request = pb.AnswerInputRequestsRequest(
            task_id=task_id,
            session_id=session_id,
            answers_json={key: _json_text(answer) for key, answer in answers.items()},
        )
        return convert.answered_from_proto(await self._unary("AnswerInputRequests", request, timeout))

    async def hold_task(
        self,
        task_id: str,
        *,
        holder: str,
        lease_token: str = "",
        session_id: str | None = None,
        timeout: Timeout = DEFAULT,
    ) -> Hold:
        """Hold a task this process runs itself (first with an empty token), or renew the hold.

        Renew within ``lease_duration`` (a third of it is a safe cadence) and
        pass ``lease_token`` with progress and the result. ``keep_running``
        False: stop the tool, store nothing (``reason`` says why). A holder
        that stops renewing leaves the task FAILED by the service's reaper.
        Errors: ``FailedPreconditionError`` (``reason`` HOLD_DISPATCHED,
        HOLD_HELD_BY_ANOTHER, HOLD_ENDED, HOLD_NOT_A_TOOL_CALL), ``NotFoundError``.
        """
        request = pb.HoldTaskRequest(task_id=task_id, session_id=session_id, holder=holder, lease_token=lease_token)
        msg = await self._unary("HoldTask", request, timeout)
        return Hold(
            lease_token=msg.lease_token,
            lease_duration=msg.lease_duration.ToTimedelta(),
            keep_running=msg.keep_running,
            reason=msg.reason,
        )
