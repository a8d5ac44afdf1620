"""Reports from a running attempt to the service, each fenced by the
attempt's lease, so a worker that lost its task cannot touch it."""

from __future__ import annotations

import asyncio
import enum
import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore.errors import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    TaskStoreError,
    UnauthenticatedError,
)
from mcp_taskstore.worker.control import Stop
from mcp_taskstore.worker.rpc import WorkerRpc

logger = logging.getLogger("mcp_taskstore.worker")

# How long a final report is retried while the service is unreachable; past
# the lease the task belongs to someone else anyway.
REPORT_RETRY_FOR = 60.0
# Refusals a retry will not change: the attempt is over (fenced, ended), or
# the credentials are wrong.
_REFUSALS = (FailedPreconditionError, NotFoundError, InvalidArgumentError, UnauthenticatedError, PermissionDeniedError)
# The ErrorInfo of a report refused because the attempt is over, as the
# service writes it (``proto/src/protocol.rs``, quoted in docs/execution.md).
REFUSED_TERMINAL = "FENCE_TERMINAL"
REFUSED_LEASE_LOST = "FENCE_LEASE_LOST"
REFUSAL_STATUS_KEY = "status"


class Reported(enum.Enum):
    STORED = "stored"
    REFUSED = "refused"
    UNREACHABLE = "unreachable"


@dataclass
class Reporter:
    """Reports for one attempt."""

    rpc: WorkerRpc
    tenant_id: str
    task_id: str
    lease_token: str
    traceparent: str | None = None

    async def store_call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        return await self.rpc.store(
            method, request, tenant=self.tenant_id or None, traceparent=self.traceparent, timeout=timeout
        )

    async def execution_call(self, method: str, request: Any, timeout: float | None = None) -> Any:
        return await self.rpc.execution(method, request, traceparent=self.traceparent, timeout=timeout)

    async def status(self, status: int, message: str) -> Stop | None:
        """Progress (best effort: a lost update is not worth failing the task).

        Returns why the attempt must stop when the service refused the update
        because the attempt is over; None otherwise, stored or not.
        """
        request = pb.UpdateTaskStatusRequest(
            task_id=self.task_id, status=status, status_message=message, lease_token=self.lease_token
        )
        try:
            await self.store_call("UpdateTaskStatus", request)
            return None
        except TaskStoreError as error:
            logger.warning("progress update of task %s not stored: %s", self.task_id, error)
            return stop_of_refusal(error)

    async def result(self, result: dict[str, Any], failed: bool, message: str | None) -> tuple[Reported, str]:
        """Stores the attempt's result: COMPLETED, or FAILED when it says ``isError``."""
        request = pb.StoreTaskResultRequest(
            task_id=self.task_id,
            status=pb.TASK_STATUS_FAILED if failed else pb.TASK_STATUS_COMPLETED,
            result_json=json.dumps(result, separators=(",", ":")),
            status_message=message,
            lease_token=self.lease_token,
        )
        return await self._retrying(lambda: self.store_call("StoreTaskResult", request))

    async def release(self, reason: int, message: str, back_off_until: datetime | None = None) -> tuple[Reported, str]:
        """Gives the task back (retryable error, shutdown, parked, or backing off until a time)."""
        request = xpb.ReleaseTaskRequest(
            task_id=self.task_id,
            lease_token=self.lease_token,
            reason=reason,  # type: ignore[arg-type]
            message=message,
            tenant_id=self.tenant_id,
        )
        if back_off_until is not None:
            request.back_off_until.FromDatetime(back_off_until)
        return await self._retrying(lambda: self.execution_call("ReleaseTask", request))

    async def ask(self, key: str, request_json: str) -> str | None:
        """AskQuestion, fenced by the lease: the answer, or None while it waits."""
        request = xpb.AskQuestionRequest(
            task_id=self.task_id,
            lease_token=self.lease_token,
            tenant_id=self.tenant_id,
            key=key,
            request_json=request_json,
        )
        response = await self.execution_call("AskQuestion", request)
        return response.answer_json if response.HasField("answer_json") else None

    async def _retrying(self, call: Any) -> tuple[Reported, str]:
        deadline = time.monotonic() + REPORT_RETRY_FOR
        delay = 0.1
        while True:
            try:
                await call()
                return Reported.STORED, ""
            except _REFUSALS as error:
                return Reported.REFUSED, error.details
            except TaskStoreError as error:
                if time.monotonic() >= deadline:
                    return Reported.UNREACHABLE, error.details
                logger.warning("report of task %s failed: %s; retrying", self.task_id, error)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)


def stop_of_refusal(error: TaskStoreError) -> Stop | None:
    """Why an attempt must stop, when the service refused one of its reports
    because the attempt is over: its task ended (a cancellation this worker
    has not heard of yet) or another claim holds it. The attempt's follow says
    so within moments as a rule; a refused report is the same news, already
    paid for, should the follow have missed it."""
    if isinstance(error, NotFoundError):
        return Stop.GONE
    if not isinstance(error, FailedPreconditionError):
        return None
    if error.reason == REFUSED_TERMINAL:
        # The service's word for the status (`TaskStatus` shown).
        return Stop.CANCELLED if error.metadata.get(REFUSAL_STATUS_KEY) == "cancelled" else Stop.FINISHED
    if error.reason == REFUSED_LEASE_LOST:
        return Stop.LEASE_LOST
    return None


MAX_FAILURE_MESSAGE = 1024


def first_text(result: dict[str, Any]) -> str | None:
    """A failed result's status message: the first line of its first text, at most 1 KiB."""
    for item in result.get("content") or []:
        if isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
            for line in item["text"].splitlines():
                if line.strip():
                    data = line.strip().encode()[:MAX_FAILURE_MESSAGE]
                    return data.decode(errors="ignore")
            return None
    return None
