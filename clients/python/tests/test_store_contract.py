"""The SDK's TaskStore contract, run on GrpcTaskStore and on InMemoryTaskStore.

Cases follow the SDK's own store tests (tests/experimental/tasks/server/
test_store.py at v1.29.0), rewritten against the public interface only, so
the same case runs on every store. Where the two stores legitimately differ
the case says so and branches on ``durable``; README.md lists each difference.
"""

from __future__ import annotations

import anyio
import pytest
from mcp.server.experimental.task_scope import new_session_scope, scoped_task_id
from mcp.shared.exceptions import McpError
from mcp.shared.experimental.tasks.helpers import cancel_task
from mcp.shared.experimental.tasks.store import TaskStore
from mcp.types import INVALID_PARAMS, CallToolResult, TaskMetadata, TextContent

from mcp_taskstore import GrpcTaskStore

from conftest import StoreFactory

pytestmark = pytest.mark.anyio

MINUTE = TaskMetadata(ttl=60_000)


def text_result(text: str, *, error: bool = False) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], isError=error)


def is_durable(store: TaskStore) -> bool:
    return isinstance(store, GrpcTaskStore)


# -- create / get -------------------------------------------------------------


async def test_new_task_is_working_and_readable(store: TaskStore) -> None:
    created = await store.create_task(metadata=MINUTE)
    assert created.taskId
    assert created.status == "working"
    assert created.ttl == 60_000
    assert created.pollInterval is not None

    fetched = await store.get_task(created.taskId)
    assert fetched is not None
    assert (fetched.taskId, fetched.status) == (created.taskId, "working")
    assert fetched.createdAt == created.createdAt


async def test_caller_chosen_id_is_kept(store: TaskStore) -> None:
    created = await store.create_task(metadata=MINUTE, task_id="chosen-by-caller")
    assert created.taskId == "chosen-by-caller"
    fetched = await store.get_task("chosen-by-caller")
    assert fetched is not None and fetched.status == "working"


async def test_sdk_session_scoped_id_is_accepted(store: TaskStore) -> None:
    # run_task() makes ids like "<32 hex>:<uuid4>"; they must round-trip.
    task_id = scoped_task_id(new_session_scope())
    created = await store.create_task(metadata=MINUTE, task_id=task_id)
    assert created.taskId == task_id
    assert (await store.get_task(task_id)) is not None


async def test_reusing_an_id_is_a_value_error(store: TaskStore) -> None:
    await store.create_task(metadata=MINUTE, task_id="twice")
    with pytest.raises(ValueError, match="already exists"):
        await store.create_task(metadata=MINUTE, task_id="twice")


async def test_unknown_task_reads_as_none(store: TaskStore) -> None:
    assert await store.get_task("no-such-task") is None


# -- status updates -----------------------------------------------------------


async def test_status_and_message_change_together(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    updated = await store.update_task(task.taskId, status="completed", status_message="finished fine")
    assert (updated.status, updated.statusMessage) == ("completed", "finished fine")
    fetched = await store.get_task(task.taskId)
    assert fetched is not None
    assert (fetched.status, fetched.statusMessage) == ("completed", "finished fine")
    assert fetched.lastUpdatedAt >= task.lastUpdatedAt


async def test_message_only_update_keeps_status(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status="input_required")
    updated = await store.update_task(task.taskId, status_message="waiting for the user")
    assert (updated.status, updated.statusMessage) == ("input_required", "waiting for the user")


async def test_status_only_update_keeps_message(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status_message="step 1 of 3")
    updated = await store.update_task(task.taskId, status="input_required")
    assert (updated.status, updated.statusMessage) == ("input_required", "step 1 of 3")


async def test_updating_unknown_task_is_a_value_error(store: TaskStore) -> None:
    with pytest.raises(ValueError, match="not found"):
        await store.update_task("no-such-task", status="completed")


@pytest.mark.parametrize("terminal", ["completed", "failed", "cancelled"])
async def test_terminal_status_is_final(store: TaskStore, terminal: str) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status=terminal)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Cannot transition from terminal status"):
        await store.update_task(task.taskId, status="working")
    other = "completed" if terminal == "failed" else "failed"
    with pytest.raises(ValueError, match="Cannot transition from terminal status"):
        await store.update_task(task.taskId, status=other)  # type: ignore[arg-type]


async def test_repeating_the_terminal_status_is_harmless(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status="completed")
    again = await store.update_task(task.taskId, status="completed")
    assert again.status == "completed"

    if is_durable(store):
        # Difference: the service never changes a terminal task, its status
        # message included, so a message-only update is refused.
        with pytest.raises(ValueError, match="terminal"):
            await store.update_task(task.taskId, status_message="a late note")
    else:
        late = await store.update_task(task.taskId, status_message="a late note")
        assert late.statusMessage == "a late note"


# -- results --------------------------------------------------------------------


async def test_stored_result_reads_back_equal(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    result = text_result("the answer")
    await store.store_result(task.taskId, result)
    assert await store.get_result(task.taskId) == result

    after = await store.get_task(task.taskId)
    assert after is not None
    if is_durable(store):
        # Difference: StoreTaskResult ends the task in the same step.
        assert after.status == "completed"
    else:
        assert after.status == "working"


async def test_sdk_complete_sequence_ends_completed(store: TaskStore) -> None:
    # TaskContext.complete(): store_result, then update_task(completed).
    task = await store.create_task(metadata=MINUTE)
    await store.store_result(task.taskId, text_result("done"))
    finished = await store.update_task(task.taskId, status="completed")
    assert finished.status == "completed"
    assert await store.get_result(task.taskId) == text_result("done")


async def test_error_result_then_completed_status(store: TaskStore) -> None:
    # What run_task does when a tool returns isError=True.
    task = await store.create_task(metadata=MINUTE)
    await store.store_result(task.taskId, text_result("disk full", error=True))
    finished = await store.update_task(task.taskId, status="completed")
    if is_durable(store):
        # Difference: the service records an isError result as FAILED, with
        # the error text as the status message; the follow-up is acknowledged.
        assert finished.status == "failed"
        assert finished.statusMessage == "disk full"
    else:
        assert finished.status == "completed"
    assert await store.get_result(task.taskId) == text_result("disk full", error=True)


async def test_result_of_unknown_task_is_none(store: TaskStore) -> None:
    assert await store.get_result("no-such-task") is None


async def test_running_task_has_no_result_yet(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    assert await store.get_result(task.taskId) is None


async def test_failed_without_result_has_none(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status="failed", status_message="boom")
    assert await store.get_result(task.taskId) is None


async def test_storing_for_unknown_task_is_a_value_error(store: TaskStore) -> None:
    with pytest.raises(ValueError, match="not found"):
        await store.store_result("no-such-task", text_result("orphan"))


# -- listing ----------------------------------------------------------------------


async def test_small_listing_fits_one_page(store: TaskStore) -> None:
    ids = [(await store.create_task(metadata=MINUTE)).taskId for _ in range(3)]
    tasks, cursor = await store.list_tasks()
    assert sorted(t.taskId for t in tasks) == sorted(ids)
    assert cursor is None


async def test_listing_pages_through_every_task(make_store: StoreFactory) -> None:
    store = make_store(page_size=2)
    ids = [(await store.create_task(metadata=MINUTE)).taskId for _ in range(5)]
    sizes: list[int] = []
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = await store.list_tasks(cursor=cursor)
        sizes.append(len(page))
        seen.extend(t.taskId for t in page)
        if cursor is None:
            break
    assert sizes == [2, 2, 1]
    assert seen == ids  # oldest first on both stores


async def test_garbage_cursor_is_a_value_error(store: TaskStore) -> None:
    await store.create_task(metadata=MINUTE)
    with pytest.raises(ValueError, match="Invalid cursor"):
        await store.list_tasks(cursor="not-a-cursor")


# -- deletion ---------------------------------------------------------------------


async def test_delete_reports_whether_it_deleted(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.store_result(task.taskId, text_result("gone soon"))
    assert await store.delete_task(task.taskId) is True
    assert await store.get_task(task.taskId) is None
    assert await store.get_result(task.taskId) is None
    assert await store.delete_task(task.taskId) is False


# -- retention --------------------------------------------------------------------


async def test_null_ttl_is_kept(store: TaskStore) -> None:
    task = await store.create_task(metadata=TaskMetadata(ttl=None))
    assert task.ttl is None
    await store.list_tasks()
    fetched = await store.get_task(task.taskId)
    assert fetched is not None and fetched.ttl is None


async def test_expired_task_disappears(store: TaskStore) -> None:
    # The SDK test forces the in-memory expiry; here both stores really expire.
    task = await store.create_task(metadata=TaskMetadata(ttl=1))
    await anyio.sleep(0.1)
    tasks, _ = await store.list_tasks()
    assert task.taskId not in [t.taskId for t in tasks]
    assert await store.get_task(task.taskId) is None


async def test_finishing_restarts_the_retention_clock(store: TaskStore) -> None:
    # Observed from outside: a task finished late in its ttl outlives its
    # original expiry, because finishing grants it a full ttl again.
    task = await store.create_task(metadata=TaskMetadata(ttl=1500))
    await anyio.sleep(1.0)
    await store.update_task(task.taskId, status="completed")
    await anyio.sleep(1.0)  # past created_at + ttl
    kept = await store.get_task(task.taskId)
    assert kept is not None and kept.ttl == 1500


# -- waiting ----------------------------------------------------------------------


async def test_waiting_on_unknown_task_is_a_value_error(store: TaskStore) -> None:
    with pytest.raises(ValueError, match="not found"):
        await store.wait_for_update("no-such-task")


async def test_wait_returns_after_a_status_change(store: TaskStore) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.get_task(task.taskId)
    woke = anyio.Event()

    async def waiter() -> None:
        await store.wait_for_update(task.taskId)
        woke.set()

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.3)
            assert not woke.is_set()
            await store.update_task(task.taskId, status="input_required")
            await woke.wait()


# -- the SDK's cancel helper on top of the store ----------------------------------------


@pytest.mark.parametrize("start", ["working", "input_required"])
async def test_cancel_helper_cancels_live_task(store: TaskStore, start: str) -> None:
    task = await store.create_task(metadata=MINUTE)
    if start != "working":
        await store.update_task(task.taskId, status=start)  # type: ignore[arg-type]
    result = await cancel_task(store, task.taskId)
    assert (result.taskId, result.status) == (task.taskId, "cancelled")
    fetched = await store.get_task(task.taskId)
    assert fetched is not None and fetched.status == "cancelled"


async def test_cancel_helper_rejects_unknown_task(store: TaskStore) -> None:
    with pytest.raises(McpError) as caught:
        await cancel_task(store, "no-such-task")
    assert caught.value.error.code == INVALID_PARAMS
    assert "not found" in caught.value.error.message


@pytest.mark.parametrize("terminal", ["completed", "failed", "cancelled"])
async def test_cancel_helper_rejects_finished_task(store: TaskStore, terminal: str) -> None:
    task = await store.create_task(metadata=MINUTE)
    await store.update_task(task.taskId, status=terminal)  # type: ignore[arg-type]
    with pytest.raises(McpError) as caught:
        await cancel_task(store, task.taskId)
    assert caught.value.error.code == INVALID_PARAMS
    assert f"terminal state '{terminal}'" in caught.value.error.message
