"""End to end: an SDK MCP server on GrpcTaskStore, an SDK client, a restart.

The server runs in a child process (Streamable HTTP on an ephemeral port).
Its tasks live in the taskstore service, so after the process is killed a
fresh one, reached by a fresh client session, still serves them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import CallToolResult, TextContent

from mcp_taskstore import TaskStatus, TaskStoreClient

from services import Service

pytestmark = pytest.mark.anyio

APP = Path(__file__).with_name("mcp_server_app.py")


class McpServerProcess:
    """The MCP server child process; ``url`` is its Streamable HTTP endpoint."""

    def __init__(self, service: Service, session: str, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(APP), "--taskstore", service.endpoint, "--session", session, *extra],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().decode()  # the app prints it once serving
        if not line.startswith("PORT "):
            self.kill()
            raise RuntimeError(f"MCP server did not start (exit {self.proc.returncode}): {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}/mcp"

    def kill(self) -> None:
        # SIGKILL: nothing gets a chance to flush or hand over state.
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


@pytest.fixture
def mcp_servers(service: Service) -> Iterator[list[McpServerProcess]]:
    started: list[McpServerProcess] = []
    yield started
    for process in started:
        process.kill()


@asynccontextmanager
async def client_session(url: str, **options: Any) -> AsyncIterator[ClientSession]:
    """An SDK client session on ``url``; ``options`` go to ``ClientSession`` (callbacks)."""
    async with streamable_http_client(url) as (read, write, _):
        async with ClientSession(read, write, **options) as session:
            await session.initialize()
            yield session


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


async def test_tasks_survive_an_mcp_server_restart(service: Service, mcp_servers: list[McpServerProcess]) -> None:
    scope = f"mcp-{uuid.uuid4().hex}"
    first = McpServerProcess(service, scope)
    mcp_servers.append(first)

    with anyio.fail_after(60):
        async with client_session(first.url) as session:
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} == {"slow_echo", "fleet_echo"}

            created = await session.experimental.call_tool_as_task(
                "slow_echo", {"text": "kept across restarts", "seconds": 0.5}, ttl=600_000
            )
            done_id = created.task.taskId
            assert created.task.status == "working"

            statuses = [status.status async for status in session.experimental.poll_task(done_id)]
            assert statuses[-1] == "completed"
            result = await session.experimental.get_task_result(done_id, CallToolResult)
            assert text_of(result) == "echo: kept across restarts"

            slow = await session.experimental.call_tool_as_task(
                "slow_echo", {"text": "never finishes", "seconds": 300}, ttl=600_000
            )
            cancelled = await session.experimental.cancel_task(slow.task.taskId)
            assert cancelled.status == "cancelled"
            with pytest.raises(McpError):  # MCP forbids cancelling twice
                await session.experimental.cancel_task(slow.task.taskId)

            listed = await session.experimental.list_tasks()
            assert {done_id, slow.task.taskId} <= {t.taskId for t in listed.tasks}

    first.kill()
    second = McpServerProcess(service, scope)
    mcp_servers.append(second)

    with anyio.fail_after(60):
        async with client_session(second.url) as session:
            again = await session.experimental.get_task(done_id)
            assert again.status == "completed"
            result = await session.experimental.get_task_result(done_id, CallToolResult)
            assert text_of(result) == "echo: kept across restarts"

            gone = await session.experimental.get_task(slow.task.taskId)
            assert gone.status == "cancelled"
            listed = await session.experimental.list_tasks()
            assert {done_id, slow.task.taskId} <= {t.taskId for t in listed.tasks}

            with pytest.raises(McpError, match="not found"):
                await session.experimental.get_task("no-such-task")


async def test_a_task_cancelled_before_its_work_starts_is_not_run(
    service: Service, mcp_servers: list[McpServerProcess], tmp_path: Path
) -> None:
    # The work waits 1 s for its first hold; the cancel comes first. Its
    # work must not run, and nothing it could not store may end the session.
    scope = f"mcp-{uuid.uuid4().hex}"
    server = McpServerProcess(service, scope, "--hold-delay", "1")
    mcp_servers.append(server)
    marker = tmp_path / "marker"

    with anyio.fail_after(60):
        async with client_session(server.url) as session:
            created = await session.experimental.call_tool_as_task(
                "slow_echo", {"text": "too late", "seconds": 300, "marker": str(marker)}, ttl=600_000
            )
            cancelled = await session.experimental.cancel_task(created.task.taskId)
            assert cancelled.status == "cancelled"
            await anyio.sleep(2)  # the delayed hold has been refused by now
            listed = await session.experimental.list_tasks()
            assert created.task.taskId in {t.taskId for t in listed.tasks}
            again = await session.experimental.get_task(created.task.taskId)
            assert again.status == "cancelled"
            assert again.statusMessage != "echoing in 300s"

    async with TaskStoreClient(service.endpoint) as client:
        info = await client.get_task(created.task.taskId, session_id=scope)
        assert info.status is TaskStatus.CANCELLED
    assert not marker.exists()  # its work never began, so it was never stopped


async def test_dispatched_tool_result_comes_from_the_fleet(
    service: Service, mcp_servers: list[McpServerProcess]
) -> None:
    scope = f"mcp-{uuid.uuid4().hex}"
    first = McpServerProcess(service, scope)
    mcp_servers.append(first)

    with anyio.fail_after(90):
        async with client_session(first.url) as session:
            created = await session.experimental.call_tool_as_task(
                "fleet_echo", {"text": "worked by the fleet"}, ttl=600_000
            )
            task_id = created.task.taskId
            # tasks/result blocks in the SDK's handler on wait_for_update
            # (WatchTask) until a worker stores the result.
            result = await session.experimental.get_task_result(task_id, CallToolResult)
            assert "worked by the fleet" in text_of(result)
            assert (await session.experimental.get_task(task_id)).status == "completed"

        # The typed client sees the same task, run by the fleet's echo tool.
        async with TaskStoreClient(service.endpoint) as client:
            info = await client.get_task(task_id, session_id=scope)
            assert info.status is TaskStatus.COMPLETED and info.tool == "echo"

    first.kill()
    second = McpServerProcess(service, scope)
    mcp_servers.append(second)
    with anyio.fail_after(60):
        async with client_session(second.url) as session:
            result = await session.experimental.get_task_result(task_id, CallToolResult)
            assert "worked by the fleet" in text_of(result)
