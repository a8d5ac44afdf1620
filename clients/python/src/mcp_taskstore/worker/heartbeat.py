"""The worker's reports to the service (``TaskExecution.Heartbeat``): who it
is, what it serves (with the tools' descriptions, so they appear in
``tools/list`` of ``/mcp`` and in ``taskstore status``), how busy it is.
The first report is the startup check, and its answer says where the jobs
are (``QueueTopology``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.errors import PermissionDeniedError, TaskStoreError, UnauthenticatedError
from mcp_taskstore.worker.rpc import WorkerRpc

logger = logging.getLogger("mcp_taskstore.worker")

DEFAULT_INTERVAL = 10.0


class WorkerRefused(Exception):
    """The service refused the worker's credentials or role: retrying cannot help."""


@dataclass
class Heartbeat:
    rpc: WorkerRpc
    endpoint: str
    worker_id: str
    descriptions: list[xpb.ToolDescription]
    slots: int
    busy: Callable[[], int]
    # Whether it consumes its tools' queues now: a worker that cannot reach
    # the broker serves nothing, and says so.
    consuming: Callable[[], bool] = lambda: True
    # Set to report at once (the worker started or stopped consuming).
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def request(self, stopping: bool) -> xpb.HeartbeatRequest:
        return xpb.HeartbeatRequest(
            worker_id=self.worker_id,
            tools=[d.name for d in self.descriptions],
            slots=self.slots,
            busy=min(self.busy(), self.slots),
            stopping=stopping,
            descriptions=self.descriptions,
            consuming=self.consuming(),
        )

    async def send(self, stopping: bool = False) -> xpb.HeartbeatResponse:
        return await self.rpc.heartbeat(self.request(stopping))

    async def register(self, stop: asyncio.Event) -> xpb.HeartbeatResponse | None:
        """Reports until the service answers (None: stopped first)."""
        delay = 0.2
        while not stop.is_set():
            try:
                response = await self.send()
                logger.info("registered with the taskstore service at %s", self.endpoint)
                return response
            except UnauthenticatedError as error:
                raise WorkerRefused(
                    f"the service at {self.endpoint} refused this worker's credentials ({error.details}): give a "
                    "worker key with --token-file or --token (`taskstore keys create --role worker`)"
                ) from None
            except PermissionDeniedError as error:
                raise WorkerRefused(
                    f"the service at {self.endpoint} does not let these credentials run tasks ({error.details}): "
                    "workers need a worker key (`taskstore keys create --role worker`)"
                ) from None
            except TaskStoreError as error:
                # An HTTP port (the MCP endpoint, say) answers with an HTTP
                # status and no grpc-status: no retry finds a taskstore there.
                if error.code == grpc.StatusCode.UNIMPLEMENTED and "http2 header with status" in (error.details or ""):
                    raise WorkerRefused(
                        f"{self.endpoint} is not a taskstore service: the address answers, but not as the taskstore "
                        "gRPC API; point --endpoint at the service's gRPC port (--listen, 50051 by default), not its "
                        f"MCP (50052) or dashboard (50053) port ({error.details})"
                    ) from None
                if error.code == grpc.StatusCode.UNIMPLEMENTED:
                    raise WorkerRefused(f"the service at {self.endpoint} predates worker heartbeats") from None
                logger.warning(
                    "cannot reach the taskstore service at %s (%s); is --endpoint right and the service running? "
                    "retrying in %.1fs",
                    self.endpoint,
                    error.details,
                    delay,
                )
            try:
                await asyncio.wait_for(stop.wait(), delay)
            except asyncio.TimeoutError:
                pass
            delay = min(delay * 2, 10.0)
        return None

    async def keep_reporting(self, interval: float, stop: asyncio.Event) -> None:
        """Reports every ``interval`` until ``stop``; a failed report is only logged."""
        while True:
            stopped = asyncio.ensure_future(stop.wait())
            changed = asyncio.ensure_future(self.changed.wait())
            await asyncio.wait({stopped, changed}, timeout=interval, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            changed.cancel()
            if stop.is_set():
                return
            self.changed.clear()
            try:
                interval = seconds(await self.send()) or interval
            except TaskStoreError as error:
                logger.warning("heartbeat not delivered (%s); the service may list this worker late", error.details)

    async def goodbye(self) -> None:
        """Says goodbye, so the worker's tools leave ListTools at once."""
        try:
            await self.send(stopping=True)
        except TaskStoreError as error:
            logger.debug("goodbye not delivered: %s", error)


def seconds(response: xpb.HeartbeatResponse) -> float:
    if not response.HasField("interval"):
        return DEFAULT_INTERVAL
    return response.interval.ToTimedelta().total_seconds() or DEFAULT_INTERVAL
