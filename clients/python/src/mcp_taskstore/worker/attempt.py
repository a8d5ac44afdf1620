"""One claimed attempt: run the tool, keep the lease alive, stop within a
moment of a cancellation, and report the outcome exactly once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass
from typing import Any

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore.errors import NotFoundError, TaskStoreError
from mcp_taskstore.worker import metrics
from mcp_taskstore.worker.context import ToolContext
from mcp_taskstore.worker.control import Control, Stop
from mcp_taskstore.worker.report import Reported, Reporter, first_text
from mcp_taskstore.worker.failures import BackOff
from mcp_taskstore.worker.follow import Followers
from mcp_taskstore.worker.tools import FleetTool, RetryableError, ToolFailure, error_result

logger = logging.getLogger("mcp_taskstore.worker")

# How long an attempt runs before it follows its task for a cancellation:
# well under the second in which a cancellation must reach the tool. Tools
# that finish sooner never open a watch (its first message is the current
# state, so a cancellation meanwhile is not missed).
WATCH_AFTER = 0.1
_TERMINAL = (pb.TASK_STATUS_COMPLETED, pb.TASK_STATUS_FAILED, pb.TASK_STATUS_CANCELLED)


@dataclass
class Attempt:
    tool: FleetTool
    reporter: Reporter
    arguments: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_duration: float
    park_after: float
    # How long a cancelled tool may take to return before it is abandoned.
    cancel_grace: float
    # Set when the worker session the attempt was claimed in is over; None:
    # claimed without one, the attempt renews its own lease.
    session_over: asyncio.Event | None = None
    # The worker's stream following its attempts (None: watch alone).
    followers: Followers | None = None

    async def run(self, abandon: asyncio.Event) -> str:
        """Runs to the end; ``abandon`` is set when the worker's shutdown grace is over.
        Returns the outcome (as the metrics count it)."""
        control = Control(self.park_after)
        ctx = ToolContext(control, self.reporter, self.attempt, self.max_attempts, self.tool.name)
        logger.info("task %s: attempt %d of %s started", self.reporter.task_id, self.attempt, self.max_attempts)
        started = time.monotonic()
        tool_task: asyncio.Task[Any] = asyncio.create_task(self.tool.run(ctx, self.arguments))
        control.tool_task = tool_task  # type: ignore[assignment]
        alive = (
            _stop_on(self.session_over, Stop.LEASE_LOST, control)
            if self.session_over is not None
            else self._keep_lease(control)
        )
        guards = [
            asyncio.create_task(self._follow_to_the_end(control)),
            asyncio.create_task(alive),
            asyncio.create_task(_stop_on(abandon, Stop.SHUTDOWN, control)),
        ]
        try:
            result, error = await self._outcome(tool_task, control)
        finally:
            for guard in guards:
                guard.cancel()
            await asyncio.gather(*guards, return_exceptions=True)
        outcome = await self._report(control.stopped, result, error)
        metrics.attempt(self.tool.name, outcome, time.monotonic() - started)
        return outcome

    async def _outcome(
        self, tool_task: asyncio.Task[Any], control: Control
    ) -> tuple[dict[str, Any] | None, BaseException | None]:
        """The tool's result or error; after a stop, waits ``cancel_grace`` at most."""
        stop_wait = asyncio.create_task(control.stop_event.wait())
        try:
            await asyncio.wait({tool_task, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop_wait.cancel()
        if not tool_task.done():
            # Stopped: the tool was cancelled; give it its grace, then abandon it.
            done, _ = await asyncio.wait({tool_task}, timeout=self.cancel_grace)
            if not done:
                logger.warning(
                    "task %s: the tool did not stop within %.1fs of its cancellation; abandoned",
                    self.reporter.task_id,
                    self.cancel_grace,
                )
                tool_task.add_done_callback(_quiet)
                return None, asyncio.CancelledError()
        if tool_task.cancelled():
            return None, asyncio.CancelledError()
        error = tool_task.exception()
        return (None, error) if error is not None else (tool_task.result(), None)

    async def _report(self, stopped: Stop | None, result: dict[str, Any] | None, error: BaseException | None) -> str:
        reporter = self.reporter
        if stopped is not None and stopped.stores_nothing:
            logger.info("task %s: attempt stopped (%s); nothing stored", reporter.task_id, stopped.value)
            return "stopped"
        if result is not None:
            failed = bool(result.get("isError"))
            reported = await reporter.result(result, failed, first_text(result) if failed else None)
            outcome = "failed" if failed else "completed"
        elif isinstance(error, RetryableError):
            reported = await reporter.release(xpb.RELEASE_REASON_RETRYABLE_ERROR, str(error) or "retryable error")
            outcome = "released"
        elif isinstance(error, BackOff):
            reported = await reporter.release(xpb.RELEASE_REASON_BACK_OFF, str(error) or "backing off", error.until)
            outcome = "backed off"
        elif isinstance(error, asyncio.CancelledError) and stopped is Stop.SHUTDOWN:
            reported = await reporter.release(xpb.RELEASE_REASON_SHUTDOWN, "worker shutting down")
            outcome = "released"
        elif isinstance(error, asyncio.CancelledError) and stopped is Stop.PARKED:
            reported = await reporter.release(xpb.RELEASE_REASON_PARKED, "waiting for an answer")
            outcome = "parked"
        else:
            if isinstance(error, asyncio.CancelledError):
                message = "the tool cancelled itself"
            elif isinstance(error, ToolFailure):
                message = str(error)
            else:
                message = f"{type(error).__name__}: {error}"
            reported = await reporter.result(error_result(message), True, message[:1024])
            outcome = "failed"
        status, why = reported
        if status is Reported.STORED:
            logger.info("task %s: attempt reported (%s)", reporter.task_id, outcome)
            return outcome
        if status is Reported.REFUSED:
            logger.warning(
                "task %s: report refused (%s); the task moved on without this attempt", reporter.task_id, why
            )
            return "stopped"
        logger.error(
            "task %s: could not report (%s); the lease will expire and the task run again", reporter.task_id, why
        )
        return "unreported"

    async def _follow_to_the_end(self, control: Control) -> None:
        """Follows the task on the worker's WatchAttempts stream (until the
        attempt ends and this is cancelled), or with a WatchTask of its own
        when the service has no such stream."""
        await asyncio.sleep(WATCH_AFTER)
        followers, reporter = self.followers, self.reporter
        if followers is not None and not followers.unsupported.is_set():
            with followers.follow(reporter.tenant_id, reporter.task_id, reporter.lease_token, control):
                await followers.unsupported.wait()
        await self._watch_for_end(control)

    async def _watch_for_end(self, control: Control) -> None:
        """Follows the task (WatchTask): a cancellation or another end stops
        the tool at once; any other change is news for a waiting question."""
        reporter = self.reporter
        while True:
            try:
                async for task in reporter.rpc.watch(
                    reporter.task_id,
                    reporter.lease_token,
                    tenant=reporter.tenant_id or None,
                    traceparent=reporter.traceparent,
                ):
                    if task.status in _TERMINAL:
                        control.stop(Stop.CANCELLED if task.status == pb.TASK_STATUS_CANCELLED else Stop.FINISHED)
                        return
                    control.notify_changed()
            except NotFoundError:
                control.stop(Stop.GONE)
                return
            except TaskStoreError as error:
                logger.debug("watch of task %s ended: %s", reporter.task_id, error)
            # The service may be restarting; lease renewal covers the gap.
            await asyncio.sleep(0.5)

    async def _keep_lease(self, control: Control) -> None:
        """Renews every third of the lease; stops the tool when told to, or
        when no renewal succeeded for a whole lease (it may be gone)."""
        every = max(self.lease_duration / 3, 0.1)
        last_renewed = time.monotonic()
        request = xpb.RenewLeaseRequest(
            task_id=self.reporter.task_id, lease_token=self.reporter.lease_token, tenant_id=self.reporter.tenant_id
        )
        while True:
            await asyncio.sleep(every)
            try:
                response = await self.reporter.execution_call("RenewLease", request, timeout=max(every, 1.0))
            except TaskStoreError as error:
                logger.warning("task %s: lease renewal failed: %s", self.reporter.task_id, error)
                if time.monotonic() - last_renewed >= self.lease_duration:
                    control.stop(Stop.LEASE_LOST)
                    return
                continue
            if not response.keep_running:
                reason = Stop.from_proto(response.stop_reason)
                logger.info("task %s: told to stop: %s", self.reporter.task_id, reason.value)
                control.stop(reason)
                return
            last_renewed = time.monotonic()


async def _stop_on(event: asyncio.Event, reason: Stop, control: Control) -> None:
    await event.wait()
    control.stop(reason)


def _quiet(task: asyncio.Task[Any]) -> None:
    """Collect an abandoned tool's end so asyncio does not log it as never retrieved."""
    with contextlib.suppress(BaseException):
        task.exception()
