"""The typed client against the real service: every RPC of TaskStore."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta, timezone

import anyio
import pytest

from mcp_taskstore import (
    AlreadyExistsError,
    Dispatch,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    TaskInfo,
    TaskStatus,
    TaskStoreClient,
    UnauthenticatedError,
)
from mcp_taskstore.worker.control import Stop
from mcp_taskstore.worker.report import stop_of_refusal

import services

pytestmark = pytest.mark.anyio


def echo_call(text: str, request_id: int = 1) -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": text}},
    }


@pytest.fixture
async def client(service: services.Service) -> AsyncIterator[TaskStoreClient]:
    async with TaskStoreClient(service.endpoint, deadline=20) as c:
        yield c


@pytest.fixture
def session() -> str:
    return f"client-{uuid.uuid4().hex}"


async def make(client: TaskStoreClient, session: str, **kwargs: object) -> TaskInfo:
    return await client.create_task(request_json={}, request_id="t", session_id=session, **kwargs)  # type: ignore[arg-type]


async def test_create_reports_what_was_granted(client: TaskStoreClient, session: str) -> None:
    task = await client.create_task(
        request_json=echo_call("x"),
        request_id=7,
        task_id=f"mine-{uuid.uuid4().hex}",
        session_id=session,
        ttl=timedelta(minutes=10),
        poll_interval=timedelta(seconds=2),
    )
    assert task.status is TaskStatus.WORKING
    assert task.task_id.startswith("mine-")
    assert task.session_id == session
    assert task.ttl == timedelta(minutes=10)
    assert task.poll_interval == timedelta(seconds=2)
    assert task.tool == "echo"  # from params.name of the tools/call
    assert task.created_at == task.last_updated_at
    assert (await client.get_task(task.task_id, session_id=session)) == task


async def test_no_expiry_task_has_no_ttl(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session, no_expiry=True)
    assert task.ttl is None


async def test_lifecycle_with_result(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)
    waiting = await client.update_task_status(
        task.task_id, TaskStatus.INPUT_REQUIRED, status_message="need a file", session_id=session
    )
    assert (waiting.status, waiting.status_message) == (TaskStatus.INPUT_REQUIRED, "need a file")
    with pytest.raises(FailedPreconditionError):  # not terminal yet
        await client.get_task_result(task.task_id, session_id=session)

    result_json = '{"content": [{"type":"text","text":"no file"}], "isError": true}'
    failed = await client.store_task_result(
        task.task_id, result_json, status=TaskStatus.FAILED, status_message="no file", session_id=session
    )
    assert failed.status is TaskStatus.FAILED
    stored = await client.get_task_result(task.task_id, session_id=session)
    assert stored.status is TaskStatus.FAILED
    assert stored.result_json == result_json  # byte for byte
    assert stored.result()["isError"] is True

    with pytest.raises(FailedPreconditionError) as refused:  # terminal is final
        await client.update_task_status(task.task_id, TaskStatus.WORKING, session_id=session)
    # The refusal says why, for programs (a worker's attempt stops on it).
    assert (refused.value.reason, refused.value.metadata) == ("FENCE_TERMINAL", {"status": "failed"})
    assert stop_of_refusal(refused.value) is Stop.FINISHED
    with pytest.raises(FailedPreconditionError):  # one result per task
        await client.store_task_result(task.task_id, {"content": []}, session_id=session)


async def test_a_report_on_a_cancelled_task_is_refused_saying_so(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)
    await client.cancel_task(task.task_id, session_id=session)
    with pytest.raises(FailedPreconditionError) as refused:
        await client.update_task_status(
            task.task_id, TaskStatus.WORKING, status_message="still going", session_id=session
        )
    assert (refused.value.reason, refused.value.metadata) == ("FENCE_TERMINAL", {"status": "cancelled"})
    # A worker whose progress report is refused this way stops its attempt.
    assert stop_of_refusal(refused.value) is Stop.CANCELLED


async def test_get_result_waits_for_the_result(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)

    async def finish_later() -> None:
        await anyio.sleep(0.5)
        await client.store_task_result(task.task_id, {"content": [], "done": 1}, session_id=session)

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(finish_later)
            stored = await client.get_task_result(task.task_id, session_id=session, wait=True)
    assert stored.status is TaskStatus.COMPLETED
    assert json.loads(stored.result_json) == {"content": [], "done": 1}


async def test_listing_pages_and_filters(client: TaskStoreClient, session: str) -> None:
    ids = [(await make(client, session)).task_id for _ in range(3)]
    echo = await client.create_task(request_json=echo_call("e"), request_id=2, session_id=session)
    await client.update_task_status(ids[1], TaskStatus.COMPLETED, session_id=session)

    first = await client.list_tasks(session_id=session, page_size=2)
    assert [t.task_id for t in first.tasks] == ids[:2]
    assert first.next_cursor is not None
    everything = [t.task_id async for t in client.iter_tasks(session_id=session, page_size=2)]
    assert everything == [*ids, echo.task_id]

    done = await client.list_tasks(session_id=session, statuses=[TaskStatus.COMPLETED])
    assert [t.task_id for t in done.tasks] == [ids[1]]
    by_tool = await client.list_tasks(session_id=session, tool="echo")
    assert [t.task_id for t in by_tool.tasks] == [echo.task_id]

    with pytest.raises(InvalidArgumentError):
        await client.list_tasks(session_id=session, cursor="tampered")


async def test_sessions_do_not_see_each_other(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)
    with pytest.raises(NotFoundError):
        await client.get_task(task.task_id, session_id=session + "-other")
    assert (await client.list_tasks(session_id=session + "-other")).tasks == []


async def test_watch_streams_every_change_until_terminal(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)
    seen: list[tuple[TaskStatus, str | None]] = []

    async def watch() -> None:
        async for info in client.watch_task(task.task_id, session_id=session):
            seen.append((info.status, info.status_message))

    with anyio.fail_after(15):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await anyio.sleep(0.3)
            await client.update_task_status(task.task_id, TaskStatus.WORKING, status_message="half", session_id=session)
            await anyio.sleep(0.3)
            await client.cancel_task(task.task_id, session_id=session)
    assert seen[0] == (TaskStatus.WORKING, None)
    assert (TaskStatus.WORKING, "half") in seen
    assert seen[-1][0] is TaskStatus.CANCELLED


async def test_cancel_is_idempotent_and_delete_removes(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session)
    cancelled = await client.cancel_task(task.task_id, session_id=session)
    assert cancelled.status is TaskStatus.CANCELLED
    assert (await client.cancel_task(task.task_id, session_id=session)).status is TaskStatus.CANCELLED

    await client.delete_task(task.task_id, session_id=session)
    with pytest.raises(NotFoundError):
        await client.get_task(task.task_id, session_id=session)
    with pytest.raises(NotFoundError):
        await client.delete_task(task.task_id, session_id=session)
    assert await client.cleanup_expired() >= 0


async def test_errors_map_to_classes(client: TaskStoreClient, session: str) -> None:
    task = await make(client, session, task_id=f"dup-{uuid.uuid4().hex}")
    with pytest.raises(AlreadyExistsError):
        await make(client, session, task_id=task.task_id)
    with pytest.raises(InvalidArgumentError):
        await make(client, session, task_id="has a space")
    with pytest.raises(InvalidArgumentError):
        await client.create_task(request_json="[1]", request_id=1, session_id=session)
    with pytest.raises(NotFoundError):
        await client.get_task("missing", session_id=session)


async def test_dispatched_task_runs_on_a_worker(client: TaskStoreClient, session: str) -> None:
    with anyio.fail_after(60):
        while "echo" not in {t.name for t in await client.list_tools()}:
            await anyio.sleep(0.2)  # a worker reports in within seconds
        task = await client.create_task(
            request_json=echo_call("hi from python"),
            request_id=1,
            session_id=session,
            dispatch=Dispatch(tool="echo", max_attempts=2),
        )
        stored = await client.get_task_result(task.task_id, session_id=session, wait=True, timeout=50)
    assert stored.status is TaskStatus.COMPLETED
    assert "hi from python" in stored.result_json
    assert stored.task.tool == "echo"


async def test_bearer_token_is_sent() -> None:
    database_url = services.new_sqlite_url()
    key = services.create_api_key(database_url)
    service = services.start_dev(database_url, ["--auth", "api-keys"])
    try:
        async with TaskStoreClient(service.endpoint) as anonymous:
            with pytest.raises(UnauthenticatedError):
                await anonymous.list_tasks()
        async with TaskStoreClient(service.endpoint, token=key) as authorised:
            task = await authorised.create_task(request_json={}, request_id=1)
            assert (await authorised.get_task(task.task_id)).task_id == task.task_id
    finally:
        service.stop()


async def test_null_ttl_is_capped_by_a_max_ttl() -> None:
    # With a server maximum, MCP's "keep forever" becomes that maximum, and
    # the store reports the granted ttl rather than None.
    from mcp.types import TaskMetadata

    from mcp_taskstore import GrpcTaskStore

    service = services.start_dev(max_ttl="1h")
    try:
        store = GrpcTaskStore(service.endpoint, session_id="capped")
        task = await store.create_task(TaskMetadata(ttl=None))
        assert task.ttl == 3_600_000
        long = await store.create_task(TaskMetadata(ttl=10 * 3_600_000))
        assert long.ttl == 3_600_000
        await store.close()
    finally:
        service.stop()


async def test_a_retried_create_with_an_idempotency_key_returns_the_first_task(
    client: TaskStoreClient, session: str
) -> None:
    key = f"key-{uuid.uuid4().hex}"
    first = await client.create_task(
        request_json=echo_call("once"), request_id=1, session_id=session, idempotency_key=key
    )
    again = await client.create_task(
        request_json=echo_call("once", request_id=2), request_id=2, session_id=session, idempotency_key=key
    )
    assert again.task_id == first.task_id
    with pytest.raises(FailedPreconditionError):
        await client.create_task(
            request_json=echo_call("twice"), request_id=3, session_id=session, idempotency_key=key
        )
    with pytest.raises(InvalidArgumentError):
        await client.create_task(request_json=echo_call("x"), request_id=4, session_id=session, idempotency_key="")
    page = await client.list_tasks(session_id=session)
    assert [task.task_id for task in page.tasks] == [first.task_id]


async def test_a_dispatched_task_takes_a_priority_in_range(client: TaskStoreClient, session: str) -> None:
    task = await client.create_task(
        request_json=echo_call("urgent"), request_id=1, session_id=session, dispatch=Dispatch(priority=9)
    )
    done = await client.get_task_result(task.task_id, session_id=session, wait=True, timeout=30)
    assert done.task.status is TaskStatus.COMPLETED
    with pytest.raises(InvalidArgumentError, match="priority"):
        await client.create_task(
            request_json=echo_call("x"), request_id=2, session_id=session, dispatch=Dispatch(priority=10)
        )


async def test_a_dispatched_task_starts_no_sooner_than_asked(client: TaskStoreClient, session: str) -> None:
    asked = anyio.current_time()
    task = await client.create_task(
        request_json=echo_call("later"),
        request_id=1,
        session_id=session,
        dispatch=Dispatch(start_after=timedelta(milliseconds=1500)),
    )
    assert (task.status_message or "").startswith("starts at ")
    done = await client.get_task_result(task.task_id, session_id=session, wait=True, timeout=30)
    assert done.task.status is TaskStatus.COMPLETED
    assert anyio.current_time() - asked >= 1.5
    with pytest.raises(InvalidArgumentError):
        await client.create_task(
            request_json=echo_call("x"),
            request_id=2,
            session_id=session,
            dispatch=Dispatch(start_at=datetime(2000, 1, 1, tzinfo=timezone.utc)),
        )
