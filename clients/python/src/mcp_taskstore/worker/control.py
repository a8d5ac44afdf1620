"""What steers one running attempt: why it stopped (decided once), the
asyncio task its tool runs in (cancelled on a stop), and the news that the
task changed (for a tool waiting for an answer)."""

from __future__ import annotations

import asyncio
import enum

from mcp_taskstore._proto import execution_pb2 as xpb


class Stop(enum.Enum):
    """Why an attempt stopped before its tool finished; the words are the
    protocol's (docs/execution.md, ``proto/src/protocol.rs``)."""

    CANCELLED = "the task was cancelled"
    FINISHED = "the task finished without this attempt"
    GONE = "the task no longer exists (expired or deleted)"
    LEASE_LOST = "the lease was lost: the task was dispatched again"
    TOLD = "the service said to stop"
    SHUTDOWN = "the worker is shutting down"
    PARKED = "the tool waits for an answer without a worker"

    @property
    def stores_nothing(self) -> bool:
        """The task moved on without this attempt: report nothing at all."""
        return self not in (Stop.SHUTDOWN, Stop.PARKED)

    @classmethod
    def from_proto(cls, reason: int) -> Stop:
        return {
            xpb.STOP_REASON_CANCELLED: cls.CANCELLED,
            xpb.STOP_REASON_FINISHED: cls.FINISHED,
            xpb.STOP_REASON_GONE: cls.GONE,
            xpb.STOP_REASON_LEASE_LOST: cls.LEASE_LOST,
        }.get(reason, cls.TOLD)  # type: ignore[call-overload]


class Control:
    """One attempt's controls, shared by its guards, its tool's context and the attempt."""

    def __init__(self, park_after: float) -> None:
        self.park_after = park_after
        self.stopped: Stop | None = None
        self.tool_task: asyncio.Task[object] | None = None
        self.stop_event = asyncio.Event()
        self._changed = asyncio.Event()

    def stop(self, reason: Stop) -> None:
        """Stops the attempt for ``reason`` (the first reason wins): the tool is cancelled."""
        if self.stopped is not None:
            return
        self.stopped = reason
        self.stop_event.set()
        if self.tool_task is not None and not self.tool_task.done():
            self.tool_task.cancel(reason.value)

    def changed(self) -> asyncio.Event:
        """An event set at the task's next change (take it before asking)."""
        return self._changed

    def notify_changed(self) -> None:
        event, self._changed = self._changed, asyncio.Event()
        event.set()
