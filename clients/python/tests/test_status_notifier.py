"""TaskStatusNotifier end to end: an SDK server on GrpcTaskStore, an SDK client listening.

The server (``status_server.py``, in this process, Streamable HTTP) follows
the tasks it hands to others; the tasks are worked elsewhere: through
another replica of the service (``serve``; on ``dev``, which is one process,
another gRPC client) and by a worker of the fleet. The SDK alone sends no
``notifications/tasks/status`` for such changes (the ``unfollowed``
control); the notifier sends each within a second.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, cast

import anyio
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.session import ServerSession
from mcp.types import ServerNotification, Task, TaskMetadata, TaskStatusNotification

from mcp_taskstore import GrpcTaskStore, TaskStatus, TaskStatusNotifier, TaskStoreClient
from mcp_taskstore.mcp_convert import to_mcp_task

from services import Process, Service, start_replica, wait_for_listening
from status_server import StatusServer, serve_status_server

pytestmark = pytest.mark.anyio

PROMPT = 1.0  # "within a second" of the change


@pytest.fixture(scope="module")
def replicas() -> Iterator[dict[str, Process]]:
    """A second replica per serve-mode service of this module, by the service's endpoint."""
    started: dict[str, Process] = {}
    yield started
    for process in started.values():
        process.stop()


@pytest.fixture
def elsewhere_endpoint(service: Service, replicas: dict[str, Process]) -> str:
    """Where changes are made "elsewhere": another replica (serve), or the same process (dev)."""
    if service.kind != "serve":
        return service.endpoint
    if service.endpoint not in replicas:
        replicas[service.endpoint] = start_replica(service)
    return f"http://{wait_for_listening(replicas[service.endpoint])}"


@dataclass
class Listener:
    """An SDK client session recording every status notification (task, arrival time)."""

    session: ClientSession
    session_id: str
    received: list[tuple[Task, float]]

    def of(self, task_id: str) -> list[Task]:
        return [task for task, _ in self.received if task.taskId == task_id]

    async def next(self, task_id: str, matches: Callable[[Task], bool], timeout: float = 5.0) -> tuple[Task, float]:
        with anyio.fail_after(timeout):
            while True:
                for task, at in self.received:
                    if task.taskId == task_id and matches(task):
                        return task, at
                await anyio.sleep(0.005)

    async def start_task(self, name: str, arguments: dict[str, Any] | None = None) -> Task:
        created = await self.session.experimental.call_tool_as_task(name, arguments or {}, ttl=120_000)
        return created.task


@asynccontextmanager
async def listen(server: StatusServer) -> AsyncIterator[Listener]:
    received: list[tuple[Task, float]] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ServerNotification) and isinstance(message.root, TaskStatusNotification):
            params = message.root.params
            received.append((Task(**{name: getattr(params, name) for name in Task.model_fields}), time.monotonic()))

    async with streamable_http_client(server.url) as (read, write, get_session_id):
        async with ClientSession(read, write, message_handler=on_message) as session:
            await session.initialize()
            session_id = get_session_id()
            assert session_id is not None
            await server.listening(session_id)
            yield Listener(session, session_id, received)


@asynccontextmanager
async def served(service: Service, endpoint: str | None = None) -> AsyncIterator[tuple[StatusServer, Listener, str]]:
    """The MCP server (its store on ``endpoint``, default the service's) and a listening client."""
    scope = f"notify-{uuid.uuid4().hex}"
    store = GrpcTaskStore(endpoint or service.endpoint, session_id=scope)
    try:
        async with serve_status_server(store) as server, listen(server) as listener:
            yield server, listener, scope
    finally:
        await store.close()


def completed_result() -> dict[str, Any]:
    return {"content": [{"type": "text", "text": "done elsewhere"}]}


async def test_working_then_completed_through_another_replica(service: Service, elsewhere_endpoint: str) -> None:
    with anyio.fail_after(60):
        async with served(service) as (server, listener, scope), TaskStoreClient(elsewhere_endpoint) as elsewhere:
            task = await listener.start_task("external")
            assert task.status == "working"
            assert server.notifier.following == 1

            t0 = time.monotonic()
            await elsewhere.update_task_status(
                task.taskId, TaskStatus.WORKING, status_message="halfway", session_id=scope
            )
            working, at = await listener.next(task.taskId, lambda t: t.statusMessage == "halfway")
            assert at - t0 < PROMPT, f"working after {at - t0:.3f}s"
            assert working.status == "working"

            t1 = time.monotonic()
            stored = await elsewhere.store_task_result(task.taskId, completed_result(), session_id=scope)
            completed, at = await listener.next(task.taskId, lambda t: t.status == "completed")
            assert at - t1 < PROMPT, f"completed after {at - t1:.3f}s"
            # The full task, in the SDK's shape: what tasks/get answers.
            assert completed == to_mcp_task(stored)
            got = await listener.session.experimental.get_task(task.taskId)
            assert Task(**{name: getattr(got, name) for name in Task.model_fields}) == completed

            # One notification per change; the creation (the client has the task) is not repeated.
            await anyio.sleep(0.3)
            assert [(t.status, t.statusMessage) for t in listener.of(task.taskId)] == [
                ("working", "halfway"),
                ("completed", None),
            ]
            assert server.notifier.following == 0, "the watch ends with the task"


async def test_cancelled_elsewhere(service: Service, elsewhere_endpoint: str) -> None:
    with anyio.fail_after(60):
        async with served(service) as (_, listener, scope), TaskStoreClient(elsewhere_endpoint) as elsewhere:
            task = await listener.start_task("external")
            t0 = time.monotonic()
            await elsewhere.cancel_task(task.taskId, session_id=scope)
            _, at = await listener.next(task.taskId, lambda t: t.status == "cancelled")
            assert at - t0 < PROMPT, f"cancelled after {at - t0:.3f}s"
            assert len(listener.of(task.taskId)) == 1


async def test_a_fleet_workers_progress_and_result(service: Service) -> None:
    with anyio.fail_after(60):
        async with served(service) as (_, listener, _scope):
            # `sleep` reports progress every second, then stores its result.
            task = await listener.start_task("fleet", {"ms": 1500})
            completed, at = await listener.next(task.taskId, lambda t: t.status == "completed", timeout=30)
            late = time.time() - (time.monotonic() - at) - completed.lastUpdatedAt.timestamp()
            assert late < PROMPT, f"completed {late:.3f}s after the worker stored it"
            seen = listener.of(task.taskId)
            assert all(t.status == "working" for t in seen[:-1]), seen
            assert any(t.status == "working" and t.statusMessage for t in seen), seen


async def test_control_without_follow_the_sdk_sends_nothing(service: Service, elsewhere_endpoint: str) -> None:
    with anyio.fail_after(60):
        async with served(service) as (_, listener, scope), TaskStoreClient(elsewhere_endpoint) as elsewhere:
            task = await listener.start_task("unfollowed")
            await elsewhere.store_task_result(task.taskId, completed_result(), session_id=scope)
            await anyio.sleep(PROMPT + 0.5)
            assert listener.of(task.taskId) == []


async def test_stops_following_when_the_session_ends(service: Service, elsewhere_endpoint: str) -> None:
    with anyio.fail_after(60):
        async with served(service) as (server, listener, scope), TaskStoreClient(elsewhere_endpoint) as elsewhere:
            first = await listener.start_task("external")
            async with listen(server) as other:
                second = await other.start_task("external")
                assert server.notifier.following == 2
            # The client's exit DELETEs its session: the server's session
            # closes, and the notifier stops following for it alone.
            with anyio.fail_after(PROMPT):
                while server.notifier.following > 1:
                    await anyio.sleep(0.01)
            await elsewhere.store_task_result(second.taskId, completed_result(), session_id=scope)
            await elsewhere.store_task_result(first.taskId, completed_result(), session_id=scope)
            await listener.next(first.taskId, lambda t: t.status == "completed")
            assert other.of(second.taskId) == []


# Only `serve` has replicas to restart (`dev` is one process).
@pytest.mark.parametrize("service", ["serve"], indirect=True)
async def test_watches_again_after_its_replica_restarts(service: Service, elsewhere_endpoint: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{probe.getsockname()[1]}"
    restarting = start_replica(service, addr)
    try:
        wait_for_listening(restarting)
        with anyio.fail_after(60):
            async with (
                served(service, f"http://{addr}") as (_, listener, scope),
                TaskStoreClient(elsewhere_endpoint) as elsewhere,
            ):
                task = await listener.start_task("external")
                # SIGTERM: the replica ends its WatchTask streams (UNAVAILABLE) and exits.
                await anyio.to_thread.run_sync(restarting.stop)
                await elsewhere.store_task_result(task.taskId, completed_result(), session_id=scope)
                restarting = start_replica(service, addr)
                await anyio.to_thread.run_sync(wait_for_listening, restarting)
                t0 = time.monotonic()
                _, at = await listener.next(task.taskId, lambda t: t.status == "completed", timeout=15)
                assert at - t0 < 6, f"completed {at - t0:.3f}s after the restart (backoff is at most 5s)"
                assert [t.status for t in listener.of(task.taskId)] == ["completed"]
    finally:
        restarting.stop()


class RecordingSession:
    """Stands in for a ServerSession: records what would be sent."""

    def __init__(self) -> None:
        self.sent: list[ServerNotification] = []

    async def send_notification(self, notification: ServerNotification) -> None:
        self.sent.append(notification)


async def test_bounded_terminal_unfollow_and_exit(service: Service) -> None:
    store = GrpcTaskStore(service.endpoint, session_id=f"notify-{uuid.uuid4().hex}")
    session = cast(ServerSession, RecordingSession())
    notifier = TaskStatusNotifier(store, max_tasks=2)
    try:
        a, b, c = [await store.create_task(TaskMetadata(ttl=60_000)) for _ in range(3)]
        assert notifier.follow(a, session) is False, "not running"
        with anyio.fail_after(30):
            async with notifier:
                assert notifier.follow(a, session) is True
                assert notifier.follow(a.taskId, session) is True, "followed already"
                assert notifier.follow(b, session) is True
                assert notifier.follow(c, session) is False, "over max_tasks"
                assert notifier.following == 2
                notifier.unfollow(a.taskId)
                assert notifier.following == 1
                assert notifier.follow(c.model_copy(update={"status": "completed"}), session) is False
                with pytest.raises(RuntimeError, match="session="):
                    notifier.follow(c)  # no request, no session
                # Given an id, the current state is sent first.
                assert notifier.follow(c.taskId, session) is True
                with anyio.fail_after(PROMPT):
                    while not cast(RecordingSession, session).sent:
                        await anyio.sleep(0.01)
                sent = cast(RecordingSession, session).sent
                assert [(n.root.params.taskId, n.root.params.status) for n in sent] == [(c.taskId, "working")]
            assert notifier.following == 0
    finally:
        await store.close()
        # grpc.aio completes a cancelled stream a moment later, on the loop
        # it was made on; this test's loop closes when it returns.
        await anyio.sleep(0.1)
