"""An SDK low-level Server on GrpcTaskStore with a TaskStatusNotifier, served in this process.

Used by test_status_notifier.py, which looks at the notifier and waits for
each client session's standalone GET stream before it expects notifications.
Streamable HTTP (``StreamableHTTPSessionManager``, stateful) under uvicorn
on an ephemeral port. Tools (task-only):

- ``external``: a task this process never touches; someone else (another
  replica, a gRPC client) works it. Followed.
- ``unfollowed``: the same, not followed: what the SDK alone does.
- ``fleet`` (``ms``): dispatched to the fleet's ``sleep`` tool. Followed.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from mcp_taskstore import GrpcTaskStore, TaskStatusNotifier, enable_durable_tasks

TASK_ONLY = types.ToolExecution(taskSupport=types.TASK_REQUIRED)
TOOLS = ["external", "unfollowed", "fleet"]


@dataclass
class StatusServer:
    url: str
    notifier: TaskStatusNotifier
    # Session ids whose standalone GET stream is open (its response started).
    listening_sessions: set[str] = field(default_factory=set)

    async def listening(self, session_id: str, timeout: float = 5.0) -> None:
        with anyio.fail_after(timeout):
            while session_id not in self.listening_sessions:
                await anyio.sleep(0.01)


def build_server(store: GrpcTaskStore, notifier: TaskStatusNotifier) -> Server:
    server = Server("status-notifications")
    enable_durable_tasks(server, store)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [types.Tool(name=name, inputSchema={"type": "object"}, execution=TASK_ONLY) for name in TOOLS]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CreateTaskResult:
        ctx = server.request_context
        metadata = ctx.experimental.task_metadata or types.TaskMetadata(ttl=120_000)
        if name == "fleet":
            request = {
                "jsonrpc": "2.0",
                "id": ctx.request_id,
                "method": "tools/call",
                "params": {"name": "sleep", "arguments": arguments},
            }
            task = await store.create_dispatched_task(metadata, request, tool="sleep")
        else:
            task = await store.create_task(metadata)
        if name != "unfollowed" and not notifier.follow(task):
            raise RuntimeError(f"could not follow {task.taskId}")
        return types.CreateTaskResult(task=task)

    return server


@asynccontextmanager
async def serve_status_server(store: GrpcTaskStore) -> AsyncIterator[StatusServer]:
    notifier = TaskStatusNotifier(store)
    manager = StreamableHTTPSessionManager(app=build_server(store, notifier))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    status = StatusServer(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", notifier)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers", []))
        session_id = headers.get(b"mcp-session-id", b"").decode()

        async def noting_send(message: Any) -> None:
            await send(message)
            # The transport registers the GET stream before it starts the response.
            if scope["method"] == "GET" and session_id and message["type"] == "http.response.start":
                status.listening_sessions.add(session_id)

        await manager.handle_request(scope, receive, noting_send)

    config = uvicorn.Config(app, lifespan="off", log_level="warning", timeout_graceful_shutdown=1)
    http = uvicorn.Server(config)
    async with notifier, manager.run(), anyio.create_task_group() as tg:
        tg.start_soon(http.serve, [sock])
        while not http.started:
            await anyio.sleep(0.01)
        try:
            yield status
        finally:
            http.should_exit = True
