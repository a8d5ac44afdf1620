"""Questions a task's tool asks (MCP input requests) through the typed client.

The tool is the fleet's built-in ``sleep`` with ``ask``: it asks an
elicitation under the key ``ask`` and sleeps once the answer accepts (a
declined answer ends it with "not slept: the question was declined"). Runs on
``serve`` (PostgreSQL + RabbitMQ + a taskworker) and on ``dev``.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import pytest

from mcp_taskstore import (
    AnsweredInputRequests,
    Dispatch,
    FailedPreconditionError,
    InputRequest,
    NotFoundError,
    TaskInfo,
    TaskStatus,
    TaskStoreClient,
)

import services

pytestmark = pytest.mark.anyio

ACCEPT = {"action": "accept", "content": {}}


@pytest.fixture
async def client(service: services.Service) -> AsyncIterator[TaskStoreClient]:
    async with TaskStoreClient(service.endpoint, deadline=20) as c:
        yield c


@pytest.fixture
def session() -> str:
    return f"questions-{uuid.uuid4().hex}"


def text_of(result: dict[str, object]) -> str:
    content = result["content"]
    assert isinstance(content, list)
    return "".join(str(item.get("text", "")) for item in content)


async def asked(client: TaskStoreClient, session: str, question: str) -> TaskInfo:
    """Dispatch ``sleep`` asking ``question`` and wait until it is open."""
    task = await client.create_task(
        request_json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 10, "ask": question}},
        },
        request_id=1,
        session_id=session,
        dispatch=Dispatch(),
    )
    with anyio.fail_after(30):
        while (now := await client.get_task(task.task_id, session_id=session)).status is not TaskStatus.INPUT_REQUIRED:
            assert not now.status.is_terminal, now
            await anyio.sleep(0.1)
    return now


async def finished(client: TaskStoreClient, session: str, task_id: str) -> str:
    stored = await client.get_task_result(task_id, session_id=session, wait=True, timeout=30)
    assert stored.status is TaskStatus.COMPLETED, stored.result_json
    return text_of(stored.result())


async def test_lists_the_open_question_and_the_answer_completes_the_task(
    client: TaskStoreClient, session: str
) -> None:
    task = await asked(client, session, "Sleep now?")
    assert task.status_message == "Sleep now?"

    open_questions = await client.list_input_requests(task.task_id, session_id=session)
    assert len(open_questions) == 1
    question = open_questions[0]
    assert isinstance(question, InputRequest)
    assert question.key == "ask"
    assert question.method == "elicitation/create"
    assert question.request["params"]["message"] == "Sleep now?"
    assert isinstance(question.request["params"]["requestedSchema"], dict)
    assert question.asked_at >= task.created_at
    assert question.is_open
    assert (question.answer, question.answered_at) == (None, None)

    # One answer taken; one for a key the tool never used, ignored.
    answered = await client.answer_input_requests(
        task.task_id, {"ask": ACCEPT, "never-asked": '{"action": "decline"}'}, session_id=session
    )
    assert isinstance(answered, AnsweredInputRequests)
    assert answered.taken == ["ask"]
    assert answered.ignored == ["never-asked"]
    assert answered.task.task_id == task.task_id
    assert answered.task.status is TaskStatus.WORKING

    assert await finished(client, session, task.task_id) == "slept 10 ms"
    [kept] = await client.list_input_requests(task.task_id, session_id=session)
    assert kept.answer == ACCEPT
    assert kept.answered_at is not None and kept.answered_at >= kept.asked_at
    assert not kept.is_open


async def test_a_declined_question_ends_the_tool_and_a_second_answer_is_ignored(
    client: TaskStoreClient, session: str
) -> None:
    task = await asked(client, session, "Really?")
    first = await client.answer_input_requests(task.task_id, {"ask": {"action": "decline"}}, session_id=session)
    assert first.taken == ["ask"]
    try:
        second = await client.answer_input_requests(task.task_id, {"ask": ACCEPT}, session_id=session)
        assert (second.taken, second.ignored) == ([], ["ask"])
    except FailedPreconditionError:
        pass  # the declined tool may have finished already
    assert await finished(client, session, task.task_id) == "not slept: the question was declined"
    [kept] = await client.list_input_requests(task.task_id, session_id=session)
    assert kept.answer == {"action": "decline"}


async def test_another_sessions_task_is_not_found(client: TaskStoreClient, session: str) -> None:
    task = await asked(client, session, "Mine?")
    other = session + "-other"
    with pytest.raises(NotFoundError):
        await client.list_input_requests(task.task_id, session_id=other)
    with pytest.raises(NotFoundError):
        await client.answer_input_requests(task.task_id, {"ask": ACCEPT}, session_id=other)
    with pytest.raises(NotFoundError):
        await client.list_input_requests("no-such-task")
    # The other session's answer changed nothing.
    [still] = await client.list_input_requests(task.task_id, session_id=session)
    assert still.is_open
    assert (await client.get_task(task.task_id, session_id=session)).status is TaskStatus.INPUT_REQUIRED
    await client.cancel_task(task.task_id, session_id=session)


async def test_answering_a_finished_task_fails_the_precondition(client: TaskStoreClient, session: str) -> None:
    task = await asked(client, session, "Finish first?")
    await client.answer_input_requests(task.task_id, {"ask": ACCEPT}, session_id=session)
    await finished(client, session, task.task_id)
    with pytest.raises(FailedPreconditionError):
        await client.answer_input_requests(task.task_id, {"later": ACCEPT}, session_id=session)

    cancelled = await asked(client, session, "Cancel me?")
    await client.cancel_task(cancelled.task_id, session_id=session)
    with pytest.raises(FailedPreconditionError):
        await client.answer_input_requests(cancelled.task_id, {"ask": ACCEPT}, session_id=session)
