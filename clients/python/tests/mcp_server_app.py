"""An MCP server (SDK low-level Server, Streamable HTTP) whose tasks live in taskstore.

Run as a child process by test_mcp_server.py:

    python mcp_server_app.py --taskstore http://HOST:PORT --session NAME

It binds an ephemeral port and prints ``PORT <n>`` on stdout once serving.
Tools:
- ``slow_echo`` runs in this process through ``run_task`` (args: text, seconds,
  and ``marker``: a file it writes ``stopped`` to when its work is cancelled);
- ``fleet_echo`` is dispatched: the task is created with a Dispatch and the
  taskstore fleet's ``echo`` tool produces the result.
"""

from __future__ import annotations

import argparse
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
import uvicorn
from mcp.server.experimental.task_context import ServerTaskContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_taskstore import GrpcTaskStore
from mcp_taskstore.server_handlers import enable_durable_tasks

TASK_ONLY = types.ToolExecution(taskSupport=types.TASK_REQUIRED)
TEXT_ARGS = {"type": "object", "properties": {"text": {"type": "string"}, "seconds": {"type": "number"}}}


def build_server(store: GrpcTaskStore) -> Server:
    server = Server("taskstore-demo")
    enable_durable_tasks(server, store)

    @server.list_tools()
    async def list_tools() -> list[types.Tool]:
        return [
            types.Tool(name="slow_echo", inputSchema=TEXT_ARGS, execution=TASK_ONLY),
            types.Tool(name="fleet_echo", inputSchema=TEXT_ARGS, execution=TASK_ONLY),
        ]

    @server.call_tool()
    async def call_tool(name: str, arguments: dict[str, Any]) -> types.CreateTaskResult:
        ctx = server.request_context
        ctx.experimental.validate_task_mode(types.TASK_REQUIRED)
        text = str(arguments.get("text", ""))

        if name == "slow_echo":
            seconds = float(arguments.get("seconds", 0.5))

            marker = arguments.get("marker")

            async def work(task: ServerTaskContext) -> types.CallToolResult:
                await task.update_status(f"echoing in {seconds}s")
                try:
                    await anyio.sleep(seconds)
                except anyio.get_cancelled_exc_class():
                    # The hold said stop (tests/test_held_tasks.py looks for this).
                    if isinstance(marker, str):
                        with open(marker, "w") as out:
                            out.write("stopped")
                    raise
                return types.CallToolResult(content=[types.TextContent(type="text", text=f"echo: {text}")])

            return await ctx.experimental.run_task(work)

        if name == "fleet_echo":
            # The fleet runs the JSON-RPC request it is given: a tools/call of
            # its own `echo` tool with this call's arguments.
            request = {
                "jsonrpc": "2.0",
                "id": ctx.request_id,
                "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": text}},
            }
            metadata = ctx.experimental.task_metadata or types.TaskMetadata(ttl=60_000)
            task = await store.create_dispatched_task(metadata, request, tool="echo")
            return types.CreateTaskResult(task=task)

        raise ValueError(f"unknown tool {name}")

    return server


def delay_first_holds(store: GrpcTaskStore, seconds: float) -> None:
    start = store.holds.start

    async def delayed(task_id: str) -> Any:
        await anyio.sleep(seconds)
        return await start(task_id)

    store.holds.start = delayed  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--taskstore", required=True)
    parser.add_argument("--session", default=None)
    # Seconds each run_task work waits before its first hold: widens the
    # window in which a client cancels a task whose work has not started.
    parser.add_argument("--hold-delay", type=float, default=0.0)
    args = parser.parse_args()

    store = GrpcTaskStore(args.taskstore, session_id=args.session)
    manager = StreamableHTTPSessionManager(app=build_server(store))
    if args.hold_delay > 0:
        delay_first_holds(store, args.hold_delay)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield
        await store.close()

    app = Starlette(routes=[Mount("/mcp", app=manager.handle_request)], lifespan=lifespan)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning")
    server = uvicorn.Server(config)

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.02)
            print(f"PORT {port}", flush=True)

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
