"""The worker's reports to the service (``TaskExecution.Heartbeat``): who it
is, what it serves (with the tools' descriptions, so they appear in
``tools/list`` of ``/mcp`` and in ``taskstore status``), how busy it is.
The first report is the startup check, and its answer says where the jobs
are (``QueueTopology``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

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

    def request(self, stopping: bool) -> xpb.HeartbeatRequest:
        return xpb.HeartbeatRequest(
            worker_id=self.worker_id,
            tools=[d.name for d in self.descriptions],
            slots=self.slots,
            busy=min(self.busy(), self.slots),
            stopping=stopping,
            descriptions=self.descriptions,
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
            try:
                await asyncio.wait_for(stop.wait(), interval)
                return
            except asyncio.TimeoutError:
                pass
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
