"""The gRPC calls a worker makes: TaskExecution (claim, renew, release, ask,
heartbeat) and the task-store calls of a running attempt (progress, result,
watch), each in the job's tenant and carrying the job's trace."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore._proto import execution_pb2_grpc as xpb_grpc
from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore._proto import task_store_pb2_grpc as pb_grpc
from mcp_taskstore.channel import TENANT_METADATA, ClientOptions, open_channel
from mcp_taskstore.errors import translate

# W3C trace context: version 00, 32 hex trace id, 16 hex parent id, flags.
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def valid_traceparent(value: object) -> str | None:
    """The header if it is a well-formed W3C ``traceparent``, else None."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if isinstance(value, str) and _TRACEPARENT.fullmatch(value.strip()):
        return value.strip()
    return None


class WorkerRpc:
    """One channel to the service, opened on the running loop; every call
    carries the worker's credentials (``ClientOptions``)."""

    def __init__(self, options: ClientOptions) -> None:
        self.options = options
        options.target_and_security()  # fail at construction on a bad endpoint
        self._channel: grpc.aio.Channel | None = None
        self._store: pb_grpc.TaskStoreStub | None = None
        self._execution: xpb_grpc.TaskExecutionStub | None = None

    def _stubs(self) -> tuple[pb_grpc.TaskStoreStub, xpb_grpc.TaskExecutionStub]:
        if self._store is None or self._execution is None:
            self._channel = open_channel(self.options)
            self._store = pb_grpc.TaskStoreStub(self._channel)
            self._execution = xpb_grpc.TaskExecutionStub(self._channel)
        return self._store, self._execution

    async def close(self) -> None:
        channel, self._channel, self._store, self._execution = self._channel, None, None, None
        if channel is not None:
            await channel.close()

    def metadata(self, tenant: str | None = None, traceparent: str | None = None) -> tuple[tuple[str, str], ...]:
        """The worker's credentials, and for an attempt its job's tenant and trace.

        A worker of a shared fleet acts in the tenant of each job: task-store
        calls name it in ``x-taskstore-tenant`` (execution calls carry it in
        ``tenant_id``). The job's ``traceparent`` goes on every call, so the
        service's spans join the trace the task was created in.
        """
        metadata = [(k, v) for k, v in self.options.metadata() if not (tenant and k == TENANT_METADATA)]
        if tenant:
            metadata.append((TENANT_METADATA, tenant))
        if traceparent:
            metadata.append(("traceparent", traceparent))
        return tuple(metadata)

    async def _call(
        self, stub: Any, method: str, request: Any, metadata: Sequence[tuple[str, str]], timeout: float | None
    ) -> Any:
        try:
            return await getattr(stub, method)(request, timeout=timeout, metadata=tuple(metadata))
        except grpc.aio.AioRpcError as error:
            raise translate(error) from None

    async def execution(
        self, method: str, request: Any, *, traceparent: str | None = None, timeout: float | None = None
    ) -> Any:
        """A TaskExecution RPC (the tenant travels in the request's ``tenant_id``)."""
        _, execution = self._stubs()
        deadline = self.options.deadline if timeout is None else timeout
        return await self._call(execution, method, request, self.metadata(None, traceparent), deadline)

    async def store(
        self,
        method: str,
        request: Any,
        *,
        tenant: str | None = None,
        traceparent: str | None = None,
        timeout: float | None = None,
    ) -> Any:
        """A TaskStore RPC in ``tenant``."""
        store, _ = self._stubs()
        deadline = self.options.deadline if timeout is None else timeout
        return await self._call(store, method, request, self.metadata(tenant, traceparent), deadline)

    async def watch(
        self, task_id: str, lease_token: str, *, tenant: str | None, traceparent: str | None
    ) -> AsyncIterator[pb.Task]:
        """WatchTask: the task now, then after every change, until terminal.
        A worker follows only the task its attempt runs: it passes the
        attempt's lease."""
        store, _ = self._stubs()
        call = store.WatchTask(
            pb.WatchTaskRequest(task_id=task_id, lease_token=lease_token),
            metadata=self.metadata(tenant, traceparent),
            timeout=None,
        )
        try:
            async for task in call:
                yield task
        except grpc.aio.AioRpcError as error:
            raise translate(error) from None
        finally:
            call.cancel()

    def watch_attempts(self, requests: AsyncIterator[xpb.WatchAttemptsRequest]) -> Any:
        """WatchAttempts: the worker's one stream following its running
        attempts (the call: iterate it for the news, cancel it to close)."""
        _, execution = self._stubs()
        return execution.WatchAttempts(requests, metadata=self.metadata(None, None), timeout=None)

    async def heartbeat(self, request: xpb.HeartbeatRequest, timeout: float = 10.0) -> xpb.HeartbeatResponse:
        return await self.execution("Heartbeat", request, timeout=timeout)  # type: ignore[no-any-return]


async def sleep_or(event: asyncio.Event, seconds: float) -> bool:
    """Sleep ``seconds``, or less if ``event`` is set; True when it was."""
    try:
        await asyncio.wait_for(event.wait(), timeout=max(seconds, 0))
        return True
    except asyncio.TimeoutError:
        return False
