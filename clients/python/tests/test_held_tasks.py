"""Tasks an SDK server runs in its own process are held (HoldTask), so none is orphaned.

The server is tests/mcp_server_app.py (low-level Server, enable_durable_tasks,
run_task) in a child process, on a `serve` service whose lease is short
(LEASE, reaped every REAPER): a task outlives its lease while the server
renews it; a cancelled one stops; and once the server is SIGKILLed its task
leaves `working` within LEASE + REAPER + SLACK, failed, naming its holder.
With the service's defaults (lease 15 s, reaper 5 s) the bound is 20 s.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.types import CallToolResult

from mcp_taskstore import TaskStatus, TaskStoreClient

import services
from test_mcp_server import McpServerProcess, client_session, text_of

pytestmark = pytest.mark.anyio

LEASE = 2.0
REAPER = 0.5
# Scheduling, a reaper pass that just missed the expiry, the poll below.
SLACK = 2.5


@pytest.fixture(scope="module")
def short_lease_service() -> Iterator[services.Service]:
    service = services.start_serve(
        extra=["--lease-duration", f"{int(LEASE * 1000)}ms", "--reaper-interval", f"{int(REAPER * 1000)}ms"],
        worker=False,
        worker_tools="",
    )
    yield service
    service.stop()


@pytest.fixture
def mcp_servers() -> Iterator[list[McpServerProcess]]:
    started: list[McpServerProcess] = []
    yield started
    for process in started:
        process.kill()


async def test_a_killed_servers_task_fails_within_the_lease_saying_why(
    short_lease_service: services.Service, mcp_servers: list[McpServerProcess]
) -> None:
    service = short_lease_service
    scope = f"held-{uuid.uuid4().hex}"
    server = McpServerProcess(service, scope)
    mcp_servers.append(server)
    pid = server.proc.pid

    async with TaskStoreClient(service.endpoint) as client:
        with anyio.fail_after(60):
            async with client_session(server.url) as session:
                # Outlives three leases: only renewals keep it.
                kept = await session.experimental.call_tool_as_task(
                    "slow_echo", {"text": "renewed", "seconds": 3 * LEASE}, ttl=600_000
                )
                doomed = await session.experimental.call_tool_as_task(
                    "slow_echo", {"text": "never", "seconds": 300}, ttl=600_000
                )
                held = await client.get_task(doomed.task.taskId, session_id=scope)
                assert held.status is TaskStatus.WORKING
                assert held.tool == "slow_echo"
                result = await session.experimental.get_task_result(kept.task.taskId, CallToolResult)
                assert text_of(result) == "echo: renewed"
                info = await client.get_task(kept.task.taskId, session_id=scope)
                assert info.status is TaskStatus.COMPLETED
                # Progress went through with the lease (fenced by its token).
                assert (await client.get_task(doomed.task.taskId, session_id=scope)).status is TaskStatus.WORKING

        server.kill()
        killed_at = time.monotonic()
        with anyio.fail_after(LEASE + REAPER + SLACK + 5):
            while True:
                info = await client.get_task(doomed.task.taskId, session_id=scope)
                if info.status is not TaskStatus.WORKING:
                    break
                await anyio.sleep(0.1)
        took = time.monotonic() - killed_at
        assert info.status is TaskStatus.FAILED, info
        assert info.status_message is not None
        assert "stopped renewing its lease" in info.status_message, info.status_message
        assert f"mcp server taskstore-demo (pid {pid} on " in info.status_message, info.status_message
        assert took <= LEASE + REAPER + SLACK, f"left working after {took:.1f}s"
        stored = await client.get_task_result(doomed.task.taskId, session_id=scope)
        assert stored.result()["isError"] is True


async def _stopped(marker: Path, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if marker.exists() and marker.read_text() == "stopped":
            return True
        await anyio.sleep(0.05)
    return False


async def test_a_cancelled_held_task_stops_its_tool(
    short_lease_service: services.Service, mcp_servers: list[McpServerProcess], tmp_path: Path
) -> None:
    service = short_lease_service
    scope = f"held-{uuid.uuid4().hex}"
    server = McpServerProcess(service, scope)
    mcp_servers.append(server)
    async with TaskStoreClient(service.endpoint) as client:
        with anyio.fail_after(60):
            async with client_session(server.url) as session:
                # Cancelled from elsewhere (gRPC): the hold's renewal says stop.
                marker = tmp_path / "grpc"
                slow = await session.experimental.call_tool_as_task(
                    "slow_echo", {"text": "stop me", "seconds": 300, "marker": str(marker)}, ttl=600_000
                )
                await anyio.sleep(0.3)
                await client.cancel_task(slow.task.taskId, session_id=scope)
                # The next renewal (every LEASE / 3) answers keep_running: false.
                assert await _stopped(marker, LEASE / 3 + 1.5), "the tool ran on after a cancellation"
                # Through MCP tasks/cancel: stopped at once in the process.
                marker = tmp_path / "mcp"
                other = await session.experimental.call_tool_as_task(
                    "slow_echo", {"text": "stop me too", "seconds": 300, "marker": str(marker)}, ttl=600_000
                )
                await anyio.sleep(0.3)
                cancelled = await session.experimental.cancel_task(other.task.taskId)
                assert cancelled.status == "cancelled"
                assert await _stopped(marker, 0.5), "tasks/cancel did not stop the tool"
                await anyio.sleep(LEASE + REAPER)
                for task_id in (slow.task.taskId, other.task.taskId):
                    info = await client.get_task(task_id, session_id=scope)
                    assert info.status is TaskStatus.CANCELLED
