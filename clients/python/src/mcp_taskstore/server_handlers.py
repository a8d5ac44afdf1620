"""Task handlers for an SDK low-level ``Server`` whose tasks outlive it.

The SDK's default tasks/get, tasks/result, tasks/list and tasks/cancel
handlers bind each task to the MCP session that created it, through a scope
embedded in the task id and held only in that server process's memory. After
a restart no session has that scope any more, so a durable task could never
be read again. ``enable_durable_tasks`` installs handlers that decide access
by the store instead: any caller holding a task id may use it, and tasks/list
shows every task in the store's scope (its ``session_id``). Put such a server
behind authentication, or give each tenant its own store ``session_id``.
"""

from __future__ import annotations

from mcp.server.experimental.task_support import TaskSupport
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import McpError
from mcp.shared.experimental.tasks.message_queue import TaskMessageQueue
from mcp.types import (
    INVALID_PARAMS,
    CancelTaskRequest,
    CancelTaskResult,
    ErrorData,
    GetTaskPayloadRequest,
    GetTaskPayloadResult,
    GetTaskRequest,
    GetTaskResult,
    ListTasksRequest,
    ListTasksResult,
)

from mcp_taskstore.errors import NotFoundError
from mcp_taskstore.holding import capture_tool_calls, default_holder, make_holding
from mcp_taskstore.mcp_convert import to_mcp_task
from mcp_taskstore.question_relay import questions_relayed
from mcp_taskstore.store import GrpcTaskStore


def _invalid(message: str) -> McpError:
    return McpError(ErrorData(code=INVALID_PARAMS, message=message))


def enable_durable_tasks(server: Server, store: GrpcTaskStore, queue: TaskMessageQueue | None = None) -> TaskSupport:
    """``server.experimental.enable_tasks(store=store)`` plus restart-proof handlers.

    Tasks that ``run_task`` runs in this process are held with a lease
    (``HoldTask``): if the process dies, the service fails them within lease
    + reaper interval (20 s by default) instead of leaving them working.
    """
    support = server.experimental.enable_tasks(store=store, queue=queue)
    capture_tool_calls(server)
    if store.holds.holder == default_holder():
        store.holds.holder = default_holder(server.name)
    store.hold_tasks = True
    make_holding(support, store.holds)

    @server.experimental.get_task()
    async def get_task(request: GetTaskRequest) -> GetTaskResult:
        task = await store.get_task(request.params.taskId)
        if task is None:
            raise _invalid(f"Task not found: {request.params.taskId}")
        return GetTaskResult(**task.model_dump())

    @server.experimental.get_task_result()
    async def get_task_result(request: GetTaskPayloadRequest) -> GetTaskPayloadResult:
        # The SDK's handler delivers queued messages and waits (through
        # store.wait_for_update, i.e. WatchTask) until the task is terminal.
        # Questions a fleet worker asks are kept in the service, not in that
        # queue: they go to the client beside it, on this request's stream.
        ctx = server.request_context
        async with questions_relayed(store, request.params.taskId, ctx.session, ctx.request_id, as_task=True):
            return await support.handler.handle(request, ctx.session, ctx.request_id)

    @server.experimental.list_tasks()
    async def list_tasks(request: ListTasksRequest) -> ListTasksResult:
        cursor = request.params.cursor if request.params else None
        try:
            tasks, next_cursor = await store.list_tasks(cursor)
        except ValueError as error:
            raise _invalid(str(error)) from None
        return ListTasksResult(tasks=tasks, nextCursor=next_cursor)

    @server.experimental.cancel_task()
    async def cancel_task(request: CancelTaskRequest) -> CancelTaskResult:
        # CancelTask (not a status update) so that a dispatched task's worker
        # is told to stop. MCP rejects cancelling a finished task; the RPC
        # would return it unchanged, so check first.
        task_id = request.params.taskId
        task = await store.get_task(task_id)
        if task is None:
            raise _invalid(f"Task not found: {task_id}")
        if task.status in ("completed", "failed", "cancelled"):
            raise _invalid(f"Cannot cancel task in terminal state '{task.status}'")
        try:
            info = await store.client.cancel_task(task_id, session_id=store.session_id)
        except NotFoundError:
            raise _invalid(f"Task not found: {task_id}") from None
        # Work this process runs stops now (its hold's renewal would say so
        # within a third of the lease).
        store.holds.stop(task_id, "the task was cancelled")
        return CancelTaskResult(**to_mcp_task(info).model_dump())

    return support
