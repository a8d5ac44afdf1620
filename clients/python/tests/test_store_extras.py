"""GrpcTaskStore behaviour beyond the SDK's interface: scope and waiting."""

from __future__ import annotations

import uuid

import anyio
import pytest
from mcp.types import TaskMetadata

from mcp_taskstore import (
    IDEMPOTENCY_META_KEY,
    START_AFTER_META_KEY,
    START_AT_META_KEY,
    GrpcTaskStore,
    idempotency_key_of,
)

import services

pytestmark = pytest.mark.anyio


async def test_each_store_sees_only_its_session(service: services.Service) -> None:
    mine = GrpcTaskStore(service.endpoint, session_id=f"a-{uuid.uuid4().hex}")
    theirs = GrpcTaskStore(service.endpoint, session_id=f"b-{uuid.uuid4().hex}")
    task = await mine.create_task(TaskMetadata(ttl=60_000))
    assert await theirs.get_task(task.taskId) is None
    assert (await theirs.list_tasks())[0] == []
    assert await theirs.delete_task(task.taskId) is False
    with pytest.raises(ValueError, match="not found"):
        await theirs.update_task(task.taskId, status="cancelled")
    assert (await mine.get_task(task.taskId)) is not None
    await mine.close()
    await theirs.close()


async def test_change_before_the_watch_starts_is_not_missed(service: services.Service) -> None:
    # The SDK reads the task, then waits; a change in between must count.
    store = GrpcTaskStore(service.endpoint, session_id=f"w-{uuid.uuid4().hex}")
    writer = GrpcTaskStore(service.endpoint, session_id=store.session_id)
    task = await store.create_task(TaskMetadata(ttl=60_000))
    assert (await store.get_task(task.taskId)) is not None
    await writer.update_task(task.taskId, status_message="moved on")
    with anyio.fail_after(5):
        await store.wait_for_update(task.taskId)
    await store.close()
    await writer.close()


async def test_the_idempotency_key_in_meta_makes_a_retried_call_one_task(service: services.Service) -> None:
    store = GrpcTaskStore(service.endpoint, session_id=f"i-{uuid.uuid4().hex}")
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "echo",
            "arguments": {"text": "once"},
            "_meta": {IDEMPOTENCY_META_KEY: f"k-{uuid.uuid4().hex}"},
        },
    }
    first = await store.create_dispatched_task(TaskMetadata(ttl=60_000), call)
    retried = await store.create_dispatched_task(TaskMetadata(ttl=60_000), {**call, "id": 2})
    assert retried.taskId == first.taskId
    assert len((await store.list_tasks())[0]) == 1
    bad = {**call, "params": {**call["params"], "_meta": {IDEMPOTENCY_META_KEY: 7}}}  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="must be a string"):
        await store.create_dispatched_task(TaskMetadata(ttl=60_000), bad)
    assert idempotency_key_of({"params": {"name": "echo"}}) is None
    await store.close()


async def test_a_start_in_meta_makes_a_dispatched_call_wait(service: services.Service) -> None:
    store = GrpcTaskStore(service.endpoint, session_id=f"s-{uuid.uuid4().hex}")
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": {START_AFTER_META_KEY: 60_000}},
    }
    task = await store.create_dispatched_task(TaskMetadata(ttl=120_000), call)
    assert (task.statusMessage or "").startswith("starts at ")
    await store.client.cancel_task(task.taskId, session_id=store.session_id)
    late = {**call, "params": {**call["params"], "_meta": {START_AT_META_KEY: "soon"}}}  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="RFC 3339"):
        await store.create_dispatched_task(TaskMetadata(ttl=120_000), late)
    await store.close()
