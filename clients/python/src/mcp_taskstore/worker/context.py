"""What a running tool can do besides computing its result: report
progress, ask its caller questions, see that it must stop."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError, TaskStoreError
from mcp_taskstore.worker.control import Control, Stop
from mcp_taskstore.worker.report import Reporter
from mcp_taskstore.worker.failures import ToolFailure

logger = logging.getLogger("mcp_taskstore.worker")

# A waiting question asks again this often even when no change was heard
# (a change can be missed while the attempt's watch reconnects).
ASK_AGAIN_EVERY = 5.0
MAX_RETRY = 2.0


class QuestionDeclined(ToolFailure):
    """The person declined or dismissed the request (an elicitation's
    ``action`` is ``decline`` or ``cancel``); ``answer`` is the whole answer.
    Uncaught, it fails the task."""

    def __init__(self, answer: dict[str, Any]) -> None:
        super().__init__(f"the question was declined ({answer.get('action', 'no action')})")
        self.answer = answer


class QuestionRefused(ToolFailure):
    """The service refused the question: a malformed key or request, or a
    key already used for another request. Uncaught, it fails the task."""


class ToolContext:
    """Given to a tool whose signature asks for it (a parameter annotated ``ToolContext``).

    Cancellation is asyncio's: when the task is cancelled, its lease is
    lost, the worker stops or a question parks, the tool's coroutine gets
    ``asyncio.CancelledError`` at its next ``await`` (clean up and let it
    propagate); ``stopped`` says why. A tool that does not stop within the
    worker's ``cancel_grace`` is abandoned (nothing it returns is stored).
    """

    def __init__(self, control: Control, reporter: Reporter, attempt: int, max_attempts: int, tool: str) -> None:
        self._control = control
        self._reporter = reporter
        self.attempt = attempt
        self.max_attempts = max_attempts
        self.tool = tool

    @property
    def task_id(self) -> str:
        return self._reporter.task_id

    @property
    def tenant_id(self) -> str:
        return self._reporter.tenant_id

    @property
    def traceparent(self) -> str | None:
        """The W3C trace context the job carried (for the tool's own calls)."""
        return self._reporter.traceparent

    @property
    def stopped(self) -> Stop | None:
        """Why the attempt must stop, once it must."""
        return self._control.stopped

    @property
    def cancelled(self) -> bool:
        return self._control.stopped is not None

    async def wait_stopped(self) -> Stop:
        """Returns once the attempt must stop (for tools that watch rather than await)."""
        await self._control.stop_event.wait()
        assert self._control.stopped is not None
        return self._control.stopped

    async def progress(self, message: str) -> None:
        """Sets the task's status message (status WORKING); watchers see it."""
        await self._status(pb.TASK_STATUS_WORKING, message)

    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """FastMCP's ``report_progress``, as a status message (``3/10: message``)."""
        amount = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
        await self.progress(f"{amount}: {message}" if message else amount)

    async def input_required(self, message: str) -> None:
        """Moves the task to INPUT_REQUIRED with a message saying what is needed."""
        await self._status(pb.TASK_STATUS_INPUT_REQUIRED, message)

    async def _status(self, status: int, message: str) -> None:
        # A refusal saying the attempt is over stops it here, as the follow
        # would (the tool is cancelled).
        stop = await self._reporter.status(status, message)
        if stop is not None:
            self._control.stop(stop)

    async def ask(self, key: str, request: dict[str, Any]) -> dict[str, Any]:
        """Asks the task's caller and waits for the answer.

        ``request`` is an MCP input request, ``{"method": "elicitation/create" |
        "sampling/createMessage" | "roots/list", "params": {...}}``, under
        ``key``, which names this question for the task's whole life (never
        reuse it for another request). The task is ``input_required`` until
        the caller answers (MCP clients through ``/mcp``, ``taskstore answer``,
        ``AnswerInputRequests``). Returns the answer (an ``ElicitResult``,
        ``CreateMessageResult`` or ``ListRootsResult``); a key answered before
        answers at once, so an attempt run again finds every answer. Raises
        ``QuestionDeclined`` for an elicitation not accepted,
        ``QuestionRefused``; when the attempt stops while waiting (or the
        answer takes longer than the worker's ``park_after``: the task then
        waits without a worker and runs again once answered),
        ``asyncio.CancelledError``.
        """
        control, reporter = self._control, self._reporter
        request_json = json.dumps(request, separators=(",", ":"))
        loop = asyncio.get_running_loop()
        park_at = loop.time() + control.park_after
        retry = 0.1
        while True:
            # Listen before asking: a change between "not yet" and the wait counts.
            changed = control.changed()
            try:
                answer = await reporter.ask(key, request_json)
            except InvalidArgumentError as error:
                raise QuestionRefused(f"the question was refused: {error.details}") from None
            except FailedPreconditionError as error:
                if (error.reason or "").startswith("QUESTION_"):
                    raise QuestionRefused(f"the question was refused: {error.details}") from None
                return await self._stop(Stop.LEASE_LOST)
            except NotFoundError:
                return await self._stop(Stop.GONE)
            except TaskStoreError as error:
                logger.warning("asking %r failed: %s; retrying", key, error)
                retry = min(retry * 2, MAX_RETRY)
                wait = retry
            else:
                if answer is not None:
                    return _answered(request, answer)
                retry, wait = 0.1, ASK_AGAIN_EVERY
            remaining = park_at - loop.time()
            if remaining <= 0:
                logger.info("no answer to %r yet; parking the attempt", key)
                return await self._stop(Stop.PARKED)
            try:
                await asyncio.wait_for(changed.wait(), timeout=min(wait, remaining))
            except asyncio.TimeoutError:
                pass

    async def elicit(self, key: str, message: str, schema: dict[str, Any]) -> dict[str, Any]:
        """``ask`` for an ``elicitation/create`` form; the ``content`` of an accepted answer."""
        answer = await self.ask(
            key, {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}
        )
        content = answer.get("content")
        return content if isinstance(content, dict) else {}

    async def _stop(self, reason: Stop) -> Any:
        self._control.stop(reason)
        # The stop cancelled this tool's task: the next await raises.
        await asyncio.sleep(0)
        raise asyncio.CancelledError(reason.value)


def _answered(request: dict[str, Any], answer_json: str) -> dict[str, Any]:
    try:
        answer = json.loads(answer_json)
    except json.JSONDecodeError as error:
        raise QuestionRefused(f"the stored answer is not JSON: {error}") from None
    if not isinstance(answer, dict):
        raise QuestionRefused("the stored answer is not a JSON object")
    if request.get("method") == "elicitation/create" and answer.get("action") != "accept":
        raise QuestionDeclined(answer)
    return answer
