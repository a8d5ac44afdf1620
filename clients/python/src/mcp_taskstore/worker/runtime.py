"""The worker: register with the service, take jobs for its tools from
RabbitMQ, hand each to a free slot to be claimed and run; on stop, take no
more jobs, let running attempts finish within a grace, then give the rest
back (``ReleaseTask(SHUTDOWN)``)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
from dataclasses import dataclass, field, replace
from typing import Any

from aio_pika.abc import AbstractIncomingMessage
from google.protobuf import json_format

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.channel import ClientOptions
from mcp_taskstore.errors import FailedPreconditionError, InvalidArgumentError, NotFoundError, TaskStoreError
from mcp_taskstore.models import TlsConfig
from mcp_taskstore.worker import broker, metrics
from mcp_taskstore.worker.attempt import Attempt
from mcp_taskstore.worker.heartbeat import Heartbeat, seconds
from mcp_taskstore.worker.report import Reporter
from mcp_taskstore.worker.follow import Followers
from mcp_taskstore.worker.rpc import WorkerRpc, valid_traceparent
from mcp_taskstore.worker.session import FIRST_OPEN_WAIT, WorkerSession
from mcp_taskstore.worker.tools import Tools, load_tools

logger = logging.getLogger("mcp_taskstore.worker")

# A delivery that waits this long for a free slot goes back to the queue for
# another worker (and never nears RabbitMQ's consumer timeout).
MAX_SLOT_WAIT = 60.0
# After the shutdown grace, how long attempts given back may take to end
# (their release reported) before the process exits anyway.
GIVE_BACK_TIMEOUT = 10.0
MAX_RECONNECT_DELAY = 10.0


def default_worker_id() -> str:
    return f"{socket.gethostname()}/{os.getpid()}"


@dataclass(frozen=True)
class WorkerConfig:
    """How a worker connects and how much it runs at once (``taskworker``'s flags)."""

    endpoint: str = "http://127.0.0.1:50051"
    amqp_url: str = "amqp://guest:guest@127.0.0.1:5672/%2f"
    amqp_tls: broker.AmqpTls = field(default_factory=broker.AmqpTls)
    # What the service's queue prefix is expected to be; the names used are
    # the ones its Heartbeat answers with (a mismatch is logged).
    queue_prefix: str | None = None
    # The same for the tool queues' type (quorum, classic): the type used is
    # the one in the Heartbeat's queue arguments.
    queue_type: str | None = None
    concurrency: int = 4
    worker_id: str = field(default_factory=default_worker_id)
    shutdown_grace: float = 30.0
    park_after: float = 60.0
    # How long a cancelled tool may take to return before it is abandoned.
    cancel_grace: float = 5.0
    token: str | None = None
    tls: TlsConfig | None = None
    metrics_listen: str | None = None


class Worker:
    """Serves ``tools`` (a ``Tools``, a FastMCP server, or functions) for a taskstore service.

    ``await worker.run()`` runs until ``worker.stop()`` (or the ``stop`` event given).
    """

    def __init__(self, tools: Any, config: WorkerConfig | None = None, **options: Any) -> None:
        self.tools: Tools = load_tools(tools)
        if len(self.tools) == 0:
            raise ValueError("no tools to serve")
        self.config = replace(config or WorkerConfig(), **options)
        if self.config.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.rpc = WorkerRpc(
            ClientOptions(endpoint=self.config.endpoint, token=self.config.token, tls=self.config.tls, deadline=30.0)
        )
        self.ready = asyncio.Event()  # set once consuming
        self.consuming = False
        self._heartbeat_changed = asyncio.Event()
        self._stop = asyncio.Event()
        self._abandon = asyncio.Event()
        self._busy = 0
        self._slots = asyncio.Semaphore(self.config.concurrency)
        self._running: set[asyncio.Task[None]] = set()
        self._slots_changed = asyncio.Event()
        self._feed: broker.Feed | None = None
        self._session = WorkerSession(self.rpc, self.config.worker_id)
        self._followers = Followers(self.rpc)

    def stop(self) -> None:
        """Stop taking jobs; running attempts get ``shutdown_grace``, then are given back."""
        self._stop.set()

    @property
    def busy(self) -> int:
        return self._busy

    async def run(self, stop: asyncio.Event | None = None) -> None:
        config = self.config
        if stop is not None:
            asyncio.get_running_loop().create_task(self._stop_when(stop))
        metrics.SLOTS.set(config.concurrency)
        metrics.SLOTS_BUSY.set(0)
        metrics_server = (
            await metrics.serve(config.metrics_listen, lambda: self.consuming) if config.metrics_listen else None
        )
        heartbeat = Heartbeat(
            self.rpc,
            config.endpoint,
            config.worker_id,
            [tool.description() for tool in self.tools],
            config.concurrency,
            lambda: self._busy,
            lambda: self.consuming,
        )
        self._heartbeat_changed = heartbeat.changed
        logger.info(
            "worker %s starting: tools %s, concurrency %d, endpoint %s",
            config.worker_id, ", ".join(self.tools.names()), config.concurrency, config.endpoint,
        )  # fmt: skip
        reporting = asyncio.Event()
        helpers: list[asyncio.Task[None]] = []
        try:
            first = await heartbeat.register(self._stop)
            if first is None:
                return
            if not first.HasField("topology"):
                raise RuntimeError(
                    f"the service at {config.endpoint} has no broker (its job queue is in-process, as in "
                    "`taskstore dev`): Python workers take jobs from RabbitMQ; run `taskstore serve` with --amqp-url"
                )
            topology = first.topology
            if config.queue_prefix and topology.exchange != f"{config.queue_prefix}.jobs":
                logger.warning(
                    "--queue-prefix %s differs from the service's (exchange %s); using the service's",
                    config.queue_prefix, topology.exchange,
                )  # fmt: skip
            announced = broker.queue_arguments(topology).get("x-queue-type")
            if config.queue_type and announced != config.queue_type:
                logger.warning(
                    "--queue-type %s differs from the service's (%s); using the service's",
                    config.queue_type, announced,
                )  # fmt: skip
            helpers.append(asyncio.create_task(heartbeat.keep_reporting(seconds(first), reporting)))
            # Until the running attempts have ended: they live by the session.
            helpers.append(asyncio.create_task(self._session.keep(reporting)))
            helpers.append(asyncio.create_task(self._followers.keep(reporting)))
            helpers.append(asyncio.create_task(self._follow_slots()))
            # Claims made before the session opens renew their own leases
            # for as long as they run: take jobs once it is open (or stop,
            # told to meanwhile: `_consume` then returns at once).
            if not await _first_of(self._session.first_settled, self._stop, seconds=FIRST_OPEN_WAIT):
                logger.warning("no worker session yet; taking jobs without one until it opens")
            await self._consume(topology)
        finally:
            await self._shut_down()
            reporting.set()
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await heartbeat.goodbye()
            if metrics_server is not None:
                metrics_server.close()
            await self.rpc.close()
            logger.info("worker stopped")

    async def _stop_when(self, event: asyncio.Event) -> None:
        await event.wait()
        self.stop()

    async def _consume(self, topology: xpb.QueueTopology) -> None:
        """Consume until stopped, reconnecting with backoff while the broker is away."""
        delay, outage = 0.2, False
        while not self._stop.is_set():
            try:
                self._feed = await broker.open_feed(
                    self.config.amqp_url,
                    self.config.amqp_tls,
                    topology,
                    self.tools.names(),
                    self.config.concurrency - self._busy,
                    self.config.worker_id,
                    self._on_delivery,
                )
            except Exception as error:
                # One warning per outage, as taskworker: each further attempt is debug.
                if outage:
                    logger.debug("job queue still unavailable (%s); reconnecting in %.1f s", error, delay)
                else:
                    logger.warning("job queue unavailable (%s); reconnecting with backoff until it is back", error)
                    outage = True
                if await _first_of(self._stop, seconds=delay):
                    return
                delay = min(delay * 2, MAX_RECONNECT_DELAY)
                continue
            if outage:
                logger.info("job queue back; consuming again")
            outage, delay = False, 0.2
            self._slots_changed.set()  # the prefetch of the slots free now
            self.consuming = True
            self._heartbeat_changed.set()
            self.ready.set()
            lost = asyncio.create_task(self._feed.closed.wait())
            stopping = asyncio.create_task(self._stop.wait())
            await asyncio.wait({lost, stopping}, return_when=asyncio.FIRST_COMPLETED)
            lost.cancel()
            stopping.cancel()
            self.consuming = False
            self._heartbeat_changed.set()
            feed, self._feed = self._feed, None
            await feed.close()
            if not self._stop.is_set():
                logger.warning("job queue unavailable (connection lost); reconnecting with backoff until it is back")
                outage = True

    async def _shut_down(self) -> None:
        self._stop.set()
        if self._feed is not None:
            feed, self._feed = self._feed, None
            try:
                await asyncio.wait_for(feed.close(), GIVE_BACK_TIMEOUT)
            except (asyncio.TimeoutError, Exception) as error:
                logger.debug("the job queue connection did not close cleanly: %s", error)
        running = {task for task in self._running if not task.done()}
        if running:
            logger.info(
                "worker stopping: no new jobs; %d running attempt(s) get %.1fs to finish",
                len(running), self.config.shutdown_grace,
            )  # fmt: skip
            _, pending = await asyncio.wait(running, timeout=self.config.shutdown_grace)
            if pending:
                logger.warning("shutdown grace over; giving %d task(s) back", len(pending))
                self._abandon.set()
                _, stuck = await asyncio.wait(pending, timeout=GIVE_BACK_TIMEOUT)
                if stuck:
                    # Their leases lapse and the service dispatches them again.
                    logger.warning("%d attempt(s) did not end after being given back; exiting anyway", len(stuck))

    async def _follow_slots(self) -> None:
        """Keeps each tool's prefetch at the free slots (coalescing changes)."""
        while True:
            await self._slots_changed.wait()
            self._slots_changed.clear()
            feed = self._feed
            if feed is not None:
                try:
                    await feed.set_prefetch(self.config.concurrency - self._busy)
                except Exception as error:
                    logger.debug("prefetch not changed: %s", error)

    def _slot(self, taken: bool) -> None:
        self._busy += 1 if taken else -1
        metrics.SLOTS_BUSY.set(self._busy)
        self._slots_changed.set()

    async def _on_delivery(self, tool: str, message: AbstractIncomingMessage) -> None:
        try:
            job = json_format.Parse(message.body, xpb.JobMessage(), ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError, json.JSONDecodeError) as error:
            job, why = None, str(error)
        else:
            why = f"it names tool {job.tool!r}" if job.tool != tool else ""
        if job is None or why or not job.task_id:
            logger.warning("malformed job on %s's queue dropped: %s", tool, why or "no task id")
            metrics.job(tool, "malformed")
            await broker.reject(message)
            return
        if self._stop.is_set():
            await broker.requeue(message)
            return
        try:
            await asyncio.wait_for(self._slots.acquire(), MAX_SLOT_WAIT)
        except asyncio.TimeoutError:
            await broker.requeue(message)  # every slot stayed busy: let another worker take it
            return
        if self._stop.is_set():
            self._slots.release()
            await broker.requeue(message)
            return
        self._slot(True)
        task = asyncio.create_task(self._claim_and_run(tool, job, message))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _claim_and_run(self, tool: str, job: xpb.JobMessage, message: AbstractIncomingMessage) -> None:
        try:
            await self._claim_and_run_inner(tool, job, message)
        except Exception:
            logger.exception("task %s: the attempt failed unexpectedly", job.task_id)
        finally:
            self._slots.release()
            self._slot(False)

    async def _claim_and_run_inner(self, tool: str, job: xpb.JobMessage, message: AbstractIncomingMessage) -> None:
        traceparent = valid_traceparent(broker.traceparent_of(message))
        session = self._session.current
        request = xpb.ClaimTaskRequest(
            task_id=job.task_id,
            generation=job.generation,
            worker_id=self.config.worker_id,
            tenant_id=job.tenant_id,
            session_id=session.id if session is not None else "",
        )
        try:
            claim = await self.rpc.execution("ClaimTask", request, traceparent=traceparent)
        except (FailedPreconditionError, NotFoundError, InvalidArgumentError) as error:
            logger.info("task %s: stale job dropped (%s)", job.task_id, error.details)
            metrics.job(tool, "stale")
            await broker.ack(message)
            return
        except TaskStoreError as error:
            logger.warning("task %s: cannot claim now (%s); job back to the queue", job.task_id, error.details)
            metrics.job(tool, "requeued")
            await asyncio.sleep(1.0)
            await broker.requeue(message)
            return
        # Claimed: the service's lease now owns the task's fate, however long it runs.
        await broker.ack(message)
        metrics.job(tool, "claimed")
        attempt = Attempt(
            tool=self.tools[tool],
            reporter=Reporter(self.rpc, job.tenant_id, job.task_id, claim.lease_token, traceparent),
            arguments=arguments_of(claim.request_json),
            attempt=claim.attempt,
            max_attempts=claim.max_attempts,
            lease_duration=claim.lease_duration.ToTimedelta().total_seconds() or 15.0,
            park_after=self.config.park_after,
            cancel_grace=self.config.cancel_grace,
            # Claimed in a session already over (not heard yet): the attempt
            # renews its own lease, as without a session.
            session_over=session.over if session is not None and claim.in_session else None,
            followers=self._followers,
        )
        await attempt.run(self._abandon)


def arguments_of(request_json: str) -> dict[str, Any]:
    """``params.arguments`` of a ``tools/call`` request; ``{}`` when absent."""
    try:
        arguments = json.loads(request_json).get("params", {}).get("arguments", {})
    except (json.JSONDecodeError, AttributeError):
        return {}
    return arguments if isinstance(arguments, dict) else {}


async def _first_of(*events: asyncio.Event, seconds: float) -> bool:
    """Waits until one of ``events`` is set, at most ``seconds``: whether one was."""
    waits = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        done, _ = await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    return bool(done)
