"""Move an existing FastMCP server's tools onto the fleet, without rewriting them.

Two lines, one per side::

    serve_on_fleet(mcp, "http://127.0.0.1:50051")   # in the MCP server
    mcp-taskstore-worker my_server:mcp              # the fleet: any number of workers

``serve_on_fleet`` makes the server answer each ``tools/call`` of those
tools by dispatching it (``CreateTask`` with a dispatch): a plain call waits
for the result (``GetTaskResult`` with wait), a task-augmented call returns
the task at once (``tasks/get``, ``tasks/result``, ``tasks/cancel`` are served
from the store, ``enable_durable_tasks``). The workers load the same module
and run the same functions (``from_fastmcp``). A worker that dies mid-call
leaves the task to another once its lease lapses; the call still gets one
result. Tools the server keeps (``keep=``) run in the server as before.

A tool that asks its caller (FastMCP's ``ctx.elicit`` on the worker) asks
this server's client: while the client waits (the plain call, or its
``tasks/result``), the question goes to it as an ``elicitation/create`` on
that request's stream, and its answer is stored with the task
(``question_relay``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import mcp.types as types
from mcp.server.session import ServerSession

from mcp_taskstore.channel import ClientOptions
from mcp_taskstore.errors import DeadlineExceededError, TaskStoreError, UnavailableError
from mcp_taskstore.holding import tool_call_json
from mcp_taskstore.call_meta import idempotency_key_of, with_start_of
from mcp_taskstore.mcp_convert import result_from_json
from mcp_taskstore.models import Dispatch, TaskStatus, TlsConfig
from mcp_taskstore.question_relay import questions_relayed
from mcp_taskstore.server_handlers import enable_durable_tasks
from mcp_taskstore.store import GrpcTaskStore

logger = logging.getLogger(__name__)

# A plain call's wait is asked again after this (the service bounds one wait).
_WAIT_SLICE = 300.0


def serve_on_fleet(
    server: Any,
    endpoint: str | ClientOptions | GrpcTaskStore,
    *,
    token: str | None = None,
    tls: TlsConfig | None = None,
    tenant: str | None = None,
    session_id: str | None = None,
    keep: Iterable[str] = (),
    max_attempts: int | None = None,
    ttl_ms: int = 3_600_000,
) -> GrpcTaskStore:
    """Answer the FastMCP ``server``'s tool calls as tasks the fleet runs.

    ``endpoint`` is the taskstore service (or a ``GrpcTaskStore``, used as
    it is); ``token``, ``tls``, ``tenant`` as ``GrpcTaskStore``'s.
    ``session_id``: the service session the tasks are created in, and the
    only tasks this server's ``tasks/get``, ``tasks/result``, ``tasks/list``
    and ``tasks/cancel`` reach; None: every task of the tenant (tasks/list
    lists them all). ``keep`` names tools that stay in the server;
    ``max_attempts`` per task (None: the service's default); ``ttl_ms``
    keeps a plain call's task that long (a task-augmented call asks its
    own). Returns the store (close it when the server stops).
    """
    lowlevel = getattr(server, "_mcp_server", server)
    if isinstance(endpoint, GrpcTaskStore):
        store = endpoint
    elif isinstance(endpoint, ClientOptions):
        store = GrpcTaskStore(endpoint, session_id=session_id)
    else:
        store = GrpcTaskStore(endpoint, token=token, tls=tls, tenant=tenant, session_id=session_id)
    if getattr(lowlevel.experimental, "task_support", None) is None:
        enable_durable_tasks(lowlevel, store)
    kept = set(keep)
    inner = lowlevel.request_handlers.get(types.CallToolRequest)

    async def call_tool(request: types.CallToolRequest) -> types.ServerResult:
        name = request.params.name
        if name in kept and inner is not None:
            return await inner(request)  # type: ignore[no-any-return]
        ctx = lowlevel.request_context
        call = tool_call_json(request, ctx.request_id)
        call["params"].pop("task", None)
        metadata = ctx.experimental.task_metadata if ctx.experimental is not None else None
        if metadata is not None:
            task = await store.create_dispatched_task(metadata, call, tool=name, max_attempts=max_attempts)
            return types.ServerResult(types.CreateTaskResult(task=task))
        try:
            result = await _run_on_fleet(store, call, name, max_attempts, ttl_ms, ctx.session)
        except TaskStoreError as error:
            result = types.CallToolResult(content=[types.TextContent(type="text", text=str(error))], isError=True)
        return types.ServerResult(result)

    lowlevel.request_handlers[types.CallToolRequest] = call_tool
    return store


async def _run_on_fleet(
    store: GrpcTaskStore,
    call: dict[str, Any],
    tool: str,
    max_attempts: int | None,
    ttl_ms: int,
    session: ServerSession,
) -> types.CallToolResult:
    """A plain call: dispatch it and wait for its one result; the tool's
    questions go to the caller meanwhile, on the call's own stream."""
    info = await store.client.create_task(
        request_json=call,
        request_id=call["id"],
        session_id=store.session_id,
        ttl=timedelta(milliseconds=ttl_ms),
        dispatch=with_start_of(Dispatch(tool=tool, max_attempts=max_attempts), call),
        # A retried call waits for the first call's task.
        idempotency_key=idempotency_key_of(call),
    )
    try:
        async with questions_relayed(store, info.task_id, session, call["id"], as_task=False):
            while True:
                try:
                    stored = await store.client.get_task_result(
                        info.task_id, session_id=store.session_id, wait=True, timeout=_WAIT_SLICE
                    )
                    break
                except (DeadlineExceededError, UnavailableError):
                    await asyncio.sleep(0.2)
    except asyncio.CancelledError:
        # The client gave up on the call (notifications/cancelled): so does the fleet.
        await asyncio.shield(_cancel(store, info.task_id))
        raise
    result = result_from_json(stored.result_json)
    if isinstance(result, types.CallToolResult):
        return result
    failed = stored.status is TaskStatus.FAILED
    return types.CallToolResult(content=[], structuredContent=result.model_dump(), isError=failed)


async def _cancel(store: GrpcTaskStore, task_id: str) -> None:
    try:
        await store.client.cancel_task(task_id, session_id=store.session_id)
    except TaskStoreError as error:
        logger.warning("could not cancel task %s: %s", task_id, error)
