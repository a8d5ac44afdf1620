"""The worker's session (TaskExecution.RenewSession): one renewal every
third of the lease keeps every attempt claimed in it alive, however many
run, in place of a RenewLease per attempt. When the service says the
session is over (the worker was frozen or cut off past its lease), or no
renewal succeeded for a whole lease, every attempt claimed in it stops and
stores nothing, and a new session opens under a new id. The worker opens
its first session before it takes jobs (waiting at most FIRST_OPEN_WAIT),
so that its first claims are in it too: an attempt claimed without one
renews its own lease for as long as it runs. Until one is open (and against
a service without sessions) claims carry none and their attempts renew
their own leases."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from dataclasses import dataclass, field

from mcp_taskstore._proto import execution_pb2 as xpb
import grpc

from mcp_taskstore.errors import TaskStoreError
from mcp_taskstore.worker.rpc import WorkerRpc, sleep_or

logger = logging.getLogger("mcp_taskstore.worker")

FIRST_RETRY = 0.2
MAX_RETRY = 5.0
DEFAULT_LEASE = 15.0
# The longest the worker waits for its first session before taking jobs.
FIRST_OPEN_WAIT = 5.0


@dataclass
class OpenSession:
    # A secret like a lease token: never logged.
    id: str
    # Set when the session is over: its attempts must stop.
    over: asyncio.Event = field(default_factory=asyncio.Event)


class WorkerSession:
    def __init__(self, rpc: WorkerRpc, worker_id: str) -> None:
        self._rpc = rpc
        self._worker_id = worker_id
        self.current: OpenSession | None = None
        # Set once the first session opened, or it is known none will.
        self.first_settled = asyncio.Event()

    async def keep(self, stop: asyncio.Event) -> None:
        """Opens sessions and renews them until ``stop`` is set (after the
        last attempt ended: a stopping worker's attempts live by it)."""
        try:
            await self._keep_opening(stop)
        finally:
            self.first_settled.set()

    async def _keep_opening(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            session_id = secrets.token_hex(16)
            lease = await self._open(session_id, stop)
            if lease is None:
                return
            session = OpenSession(session_id)
            self.current = session
            self.first_settled.set()
            logger.debug("worker session open")
            over = await self._renew_until_over(session_id, lease, stop)
            self.current = None
            if over:
                logger.warning("worker session over; stopping its attempts (they run again elsewhere)")
                session.over.set()

    async def _open(self, session_id: str, stop: asyncio.Event) -> float | None:
        delay = FIRST_RETRY
        while True:
            try:
                lease = await self._renew(session_id, open_it=True)
                if lease is not None:
                    return lease
                logger.warning("new worker session refused; retrying")
            except TaskStoreError as error:
                if error.code == grpc.StatusCode.UNIMPLEMENTED:
                    logger.info("the service keeps no worker sessions; attempts renew their own leases")
                    return None
                logger.debug("cannot open a worker session yet (%s); retrying", error)
            if await sleep_or(stop, delay):
                return None
            delay = min(delay * 2, MAX_RETRY)

    async def _renew_until_over(self, session_id: str, lease: float, stop: asyncio.Event) -> bool:
        last_renewed = time.monotonic()
        while True:
            every = max(lease / 3, 0.1)
            if await sleep_or(stop, every):
                return False
            try:
                renewed = await self._renew(session_id, open_it=False)
            except TaskStoreError as error:
                logger.warning("worker session renewal failed: %s", error)
                if time.monotonic() - last_renewed >= lease:
                    return True
                continue
            if renewed is None:
                return True
            lease, last_renewed = renewed, time.monotonic()

    async def _renew(self, session_id: str, *, open_it: bool) -> float | None:
        """One RenewSession call: the lease duration, or None when the session is over."""
        response = await self._rpc.execution(
            "RenewSession",
            xpb.RenewSessionRequest(session_id=session_id, worker_id=self._worker_id, open=open_it),
            timeout=10.0,
        )
        if not response.keep_running:
            return None
        return response.lease_duration.ToTimedelta().total_seconds() or DEFAULT_LEASE
