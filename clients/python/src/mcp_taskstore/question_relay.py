"""A fleet task's questions, relayed to the MCP client waiting for the task.

A tool running on a worker asks its caller with ``AskQuestion``: the question
is kept with the task in the service, and the task is ``input_required``
until it is answered. When an SDK server dispatched the call
(``serve_on_fleet``, ``create_dispatched_task``), the caller is that server's
client, which never talks to the service. So, while a request of that client
waits for the task (a plain ``tools/call``, or ``tasks/result`` of a
task-augmented call), each open question goes to it as the service's own
``/mcp`` sends them (2025-11-25): a request (``elicitation/create``,
``sampling/createMessage``, ``roots/list``) on the waiting request's stream,
naming the task in ``_meta["io.modelcontextprotocol/related-task"]`` when
the client called the tool as a task. The client's result is stored with
``AnswerInputRequests``, where the worker's tool reads it.

A question stays open (answerable through the service: its ``/mcp``,
``answer_input_requests``, ``taskstore answer``) when the client did not
declare the capability it needs, answers with an error, or gives an answer
the service refuses.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import McpError
from mcp.shared.experimental.tasks.helpers import RELATED_TASK_METADATA_KEY
from mcp.shared.message import ServerMessageMetadata

from mcp_taskstore.errors import (
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TaskStoreError,
    UnavailableError,
)
from mcp_taskstore.models import InputRequest, TaskStatus
from mcp_taskstore.store import GrpcTaskStore

logger = logging.getLogger(__name__)

# What each kind of question is answered with, and the client capability it needs.
_RESULT_TYPES: dict[str, type[types.Result]] = {
    "elicitation/create": types.ElicitResult,
    "sampling/createMessage": types.CreateMessageResult,
    "roots/list": types.ListRootsResult,
}
_CAPABILITIES: dict[str, types.ClientCapabilities] = {
    "elicitation/create": types.ClientCapabilities(elicitation=types.ElicitationCapability()),
    "sampling/createMessage": types.ClientCapabilities(sampling=types.SamplingCapability()),
    "roots/list": types.ClientCapabilities(roots=types.RootsCapability()),
}

# A watch that a replica's shutdown (or the tenant's waiting-call limit) ended is started again.
_RETRYABLE = (UnavailableError, ResourceExhaustedError)
_RETRY_INITIAL, _RETRY_MAX = 0.25, 5.0

_relays: set[asyncio.Task[None]] = set()


@asynccontextmanager
async def questions_relayed(
    store: GrpcTaskStore,
    task_id: str,
    session: ServerSession,
    request_id: types.RequestId,
    *,
    as_task: bool,
) -> AsyncIterator[None]:
    """While the body waits for ``task_id``, its questions go to ``session``'s
    client (``relay_questions``); the relay stops when the body ends.

    The relay is a task of its own rather than a child of an anyio task
    group: a task group would wrap whatever the wait raises (a
    ``TaskStoreError``, the call's cancellation) in an exception group.
    """
    relay = asyncio.create_task(_relay_logged(store, task_id, session, request_id, as_task))
    # asyncio keeps only weak references to tasks: hold it until it is done.
    _relays.add(relay)
    relay.add_done_callback(_relays.discard)
    try:
        yield
    finally:
        relay.cancel()


async def _relay_logged(
    store: GrpcTaskStore, task_id: str, session: ServerSession, request_id: types.RequestId, as_task: bool
) -> None:
    # A fault of the relay must not fail the call it serves: the questions
    # can still be answered through the service.
    try:
        await relay_questions(store, task_id, session, request_id, as_task=as_task)
    except Exception:
        logger.exception("relaying the questions of task %s failed", task_id)


async def relay_questions(
    store: GrpcTaskStore,
    task_id: str,
    session: ServerSession,
    request_id: types.RequestId,
    *,
    as_task: bool,
) -> None:
    """Ask ``session``'s client each open question of ``task_id``, once, and
    store its answers; returns when the task ends (or its watch cannot go on).

    Run it beside the wait for the task's result and cancel it when that
    wait ends. ``request_id`` is the waiting request: the questions go on its
    stream. ``as_task``: the client called the tool as a task (tasks/result),
    so each question names the task.
    """
    asked: set[str] = set()
    async with anyio.create_task_group() as questions:

        async def ask_new(open_questions: list[InputRequest]) -> None:
            for question in open_questions:
                if question.key in asked:
                    continue
                asked.add(question.key)
                questions.start_soon(_ask, store, task_id, question, session, request_id, as_task)

        await _follow(store, task_id, ask_new)
        # The task ended: questions still waiting for the client are moot.
        questions.cancel_scope.cancel()


async def _follow(
    store: GrpcTaskStore, task_id: str, ask_new: Callable[[list[InputRequest]], Awaitable[None]]
) -> None:
    """Calls ``ask_new`` with the open questions each time the task waits for answers."""
    delay = _RETRY_INITIAL
    while True:
        try:
            updates = store.client.watch_task(task_id, session_id=store.session_id)
            async with aclosing(updates):
                async for task in updates:
                    delay = _RETRY_INITIAL
                    if task.status is TaskStatus.INPUT_REQUIRED:
                        listed = await store.client.list_input_requests(task_id, session_id=store.session_id)
                        await ask_new([question for question in listed if question.is_open])
            return  # the service ends the stream once the task is terminal
        except (NotFoundError, InvalidArgumentError):
            return  # deleted or expired: nobody will ask any more
        except _RETRYABLE as error:
            logger.debug("watching task %s for questions again after %s", task_id, error)
        except TaskStoreError as error:
            logger.warning("stopped relaying the questions of task %s: %s", task_id, error)
            return
        await anyio.sleep(delay)
        delay = min(delay * 2, _RETRY_MAX)


async def _ask(
    store: GrpcTaskStore,
    task_id: str,
    question: InputRequest,
    session: ServerSession,
    request_id: types.RequestId,
    as_task: bool,
) -> None:
    method = question.method
    result_type = _RESULT_TYPES.get(method)
    if result_type is None:
        logger.warning(
            "question %r of task %s asks %r, which no MCP client answers; left open", question.key, task_id, method
        )
        return
    if not session.check_client_capability(_CAPABILITIES[method]):
        logger.warning(
            "question %r of task %s not relayed: the client did not declare the capability %s needs; "
            "it waits for an answer through taskstore",
            question.key,
            task_id,
            method,
        )
        return
    params: dict[str, Any] = dict(question.request.get("params") or {})
    if as_task:
        params["_meta"] = {**(params.get("_meta") or {}), RELATED_TASK_METADATA_KEY: {"taskId": task_id}}
    try:
        request = types.ServerRequest.model_validate({"method": method, "params": params})
    except ValueError as error:
        logger.warning(
            "question %r of task %s is not a valid %s request: %s; left open", question.key, task_id, method, error
        )
        return
    try:
        result = await session.send_request(
            request, result_type, metadata=ServerMessageMetadata(related_request_id=request_id)
        )
    except McpError as error:
        logger.warning(
            "the client answered question %r of task %s with an error: %s; left open", question.key, task_id, error
        )
        return
    answer = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        await store.client.answer_input_requests(task_id, {question.key: answer}, session_id=store.session_id)
    except TaskStoreError as error:
        logger.warning(
            "the client's answer to question %r of task %s was not stored: %s", question.key, task_id, error
        )
