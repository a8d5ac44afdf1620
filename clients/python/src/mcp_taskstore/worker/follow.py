"""One WatchAttempts stream for all of the worker's running attempts: it
tells each attempt to stop (cancelled, finished elsewhere, gone) within
moments, and wakes a tool waiting for an answer when its task changes,
instead of a WatchTask stream per attempt. A broken stream is opened again
and follows every running attempt again. Against a service without the
call, ``unsupported`` is set and attempts watch their tasks one by one."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import grpc

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.worker.control import Control, Stop
from mcp_taskstore.worker.rpc import WorkerRpc, sleep_or

logger = logging.getLogger("mcp_taskstore.worker")

REOPEN_AFTER = 0.5
MAX_PER_MESSAGE = 1000

_Key = tuple[str, str]


class Followers:
    def __init__(self, rpc: WorkerRpc) -> None:
        self._rpc = rpc
        self._attempts: dict[_Key, tuple[str, Control]] = {}
        # The open stream's outgoing messages, if one is open.
        self._outgoing: asyncio.Queue[xpb.WatchAttemptsRequest] | None = None
        self.unsupported = asyncio.Event()

    @contextmanager
    def follow(self, tenant_id: str, task_id: str, lease_token: str, control: Control) -> Iterator[None]:
        """Follows the attempt while the context is open."""
        key = (tenant_id, task_id)
        self._attempts[key] = (lease_token, control)
        self._send(xpb.WatchAttemptsRequest(follow=[_followed(key, lease_token)]))
        try:
            yield
        finally:
            self._attempts.pop(key, None)
            self._send(xpb.WatchAttemptsRequest(unfollow=[_followed(key, "")]))

    def _send(self, request: xpb.WatchAttemptsRequest) -> None:
        if self._outgoing is not None:
            self._outgoing.put_nowait(request)

    async def keep(self, stop: asyncio.Event) -> None:
        """Keeps the stream open until ``stop`` is set."""
        while not stop.is_set():
            outgoing: asyncio.Queue[xpb.WatchAttemptsRequest] = asyncio.Queue()
            everything = [_followed(key, lease) for key, (lease, _) in self._attempts.items()]
            for start in range(0, len(everything), MAX_PER_MESSAGE):
                outgoing.put_nowait(xpb.WatchAttemptsRequest(follow=everything[start : start + MAX_PER_MESSAGE]))
            self._outgoing = outgoing
            call = self._rpc.watch_attempts(_drain(outgoing))
            try:
                async for news in call:
                    self._deliver(news)
            except grpc.aio.AioRpcError as error:
                if error.code() == grpc.StatusCode.UNIMPLEMENTED:
                    logger.info("the service has no WatchAttempts; attempts watch their tasks one by one")
                    self.unsupported.set()
                    return
                logger.debug("attempt stream broke (%s); reopening", error.code().name)
            finally:
                self._outgoing = None
                call.cancel()
            if await sleep_or(stop, REOPEN_AFTER):
                return

    def _deliver(self, news: xpb.AttemptNews) -> None:
        followed = self._attempts.get((news.tenant_id, news.task_id))
        if followed is None:
            return
        _, control = followed
        if news.HasField("stop"):
            control.stop(Stop.from_proto(news.stop))
        else:
            control.notify_changed()


def _followed(key: _Key, lease_token: str) -> xpb.FollowedAttempt:
    return xpb.FollowedAttempt(tenant_id=key[0], task_id=key[1], lease_token=lease_token)


async def _drain(queue: asyncio.Queue[xpb.WatchAttemptsRequest]) -> AsyncIterator[xpb.WatchAttemptsRequest]:
    while True:
        yield await queue.get()
