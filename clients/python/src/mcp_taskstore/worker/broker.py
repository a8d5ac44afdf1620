"""Jobs from RabbitMQ (aio-pika): the topology exactly as the service's
``Heartbeat`` names it, one consumer per tool, manual acknowledgement, and
a prefetch that follows the worker's free slots."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aio_pika
import pamqp.encode
from aio_pika.abc import AbstractChannel, AbstractIncomingMessage, AbstractRobustConnection

from mcp_taskstore._proto import execution_pb2 as xpb

logger = logging.getLogger("mcp_taskstore.worker")


class AmqpLongInt(int):
    """An integer the AMQP encoder writes as a long (signed 32-bit, ``I``),
    as the service and taskworker (lapin) declare it; pamqp alone writes
    small integers as short-short (``b``). The queue's declaration is then
    theirs byte for byte, whatever the broker's rules for equivalence."""


def _install_long_int() -> None:
    original = pamqp.encode.table_integer
    if getattr(original, "_mcp_taskstore", False):
        return

    def table_integer(value: int) -> bytes:
        if isinstance(value, AmqpLongInt):
            return b"I" + pamqp.encode.long_int(int(value))
        return original(value)

    table_integer._mcp_taskstore = True  # type: ignore[attr-defined]
    pamqp.encode.table_integer = table_integer


_install_long_int()


class _OutageNoise(logging.Filter):
    """aiormq logs every failed connection attempt as an ERROR and a lost
    connection as a WARNING with a traceback: an outage of a minute fills
    the log. The worker says it once per outage (``job queue unavailable``),
    as taskworker does, so these records go to this package's logger at
    debug level instead; aiormq's other records pass unchanged."""

    # Format strings (``record.msg``) of the records that only say the
    # connection could not be made or was lost.
    NOISE = (
        "error when creating transport",
        "Cancelling cause reader exited abnormally",
        "Unexpected connection close from remote",
        "Server connection %r was stuck",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and record.msg.startswith(self.NOISE):
            cause = f" ({record.exc_info[1]!r})" if record.exc_info and record.exc_info[1] else ""
            logger.debug("%s: %s%s", record.name, record.getMessage(), cause)
            return False
        return True


def quiet_outage_noise() -> None:
    """Install ``_OutageNoise`` on aiormq's connection logger (once)."""
    aiormq_logger = logging.getLogger("aiormq.connection")
    if not any(isinstance(f, _OutageNoise) for f in aiormq_logger.filters):
        aiormq_logger.addFilter(_OutageNoise())


def queue_arguments(topology: xpb.QueueTopology) -> dict[str, Any]:
    """``queue_arguments`` with their AMQP types: text a long string, integer a long."""
    arguments: dict[str, Any] = {}
    for argument in topology.queue_arguments:
        kind = argument.WhichOneof("value")
        if kind == "text":
            arguments[argument.name] = argument.text
        elif kind == "integer":
            arguments[argument.name] = AmqpLongInt(argument.integer)
        else:
            raise ValueError(f"queue argument {argument.name!r} has no value this worker knows")
    return arguments


@dataclass(frozen=True)
class AmqpTls:
    """TLS to an ``amqps://`` broker: a CA to trust instead of the system's, a client certificate."""

    ca_cert: Path | None = None
    client_cert: Path | None = None
    client_key: Path | None = None

    def context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.ca_cert) if self.ca_cert else None)
        if (self.client_cert is None) != (self.client_key is None):
            raise ValueError("--amqp-client-cert and --amqp-client-key go together")
        if self.client_cert is not None and self.client_key is not None:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context


Handler = Callable[[str, AbstractIncomingMessage], Awaitable[None]]


@dataclass
class _Consumer:
    queue: Any
    callback: Any
    tag: str
    active: bool = True


@dataclass
class Feed:
    """One connection's consumers. ``closed`` is set when the connection is lost."""

    connection: Any
    channels: dict[str, AbstractChannel] = field(default_factory=dict)
    consumers: dict[str, _Consumer] = field(default_factory=dict)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    prefetch: int = 0

    async def set_prefetch(self, free: int) -> None:
        """Deliver at most ``free`` unacknowledged jobs per tool. Jobs are
        acknowledged at claim time, so this is how many may wait for a slot.
        With no free slot the consumers are cancelled (RabbitMQ reads a
        prefetch of 0 as no limit) and the broker gives jobs to workers that
        have room; they consume again as soon as a slot frees."""
        if self.closed.is_set():
            return
        if free <= 0:
            for consumer in self.consumers.values():
                if consumer.active:
                    consumer.active = False
                    await consumer.queue.cancel(consumer.tag)
            return
        if free != self.prefetch:
            self.prefetch = free
            for channel in list(self.channels.values()):
                await channel.set_qos(prefetch_count=free)
        for consumer in self.consumers.values():
            if not consumer.active:
                consumer.active = True
                await consumer.queue.consume(consumer.callback, no_ack=False, consumer_tag=consumer.tag)

    async def close(self) -> None:
        for channel in self.channels.values():
            try:
                await channel.close()
            except Exception as error:  # closing a lost channel
                logger.debug("closing a channel: %s", error)
        try:
            await self.connection.close()
        except Exception as error:
            logger.debug("closing the broker connection: %s", error)


async def open_feed(
    url: str,
    tls: AmqpTls,
    topology: xpb.QueueTopology,
    tools: list[str],
    prefetch: int,
    worker_id: str,
    handler: Handler,
) -> Feed:
    """Connects, declares exactly the service's topology and starts consuming each tool's queue."""
    quiet_outage_noise()
    ssl_context = tls.context() if url.startswith("amqps://") else None
    connection: AbstractRobustConnection = await aio_pika.connect(  # type: ignore[assignment]
        url,
        ssl_context=ssl_context,
        timeout=10,
        client_properties={"connection_name": f"mcp-taskstore-worker {worker_id}"},
    )
    feed = Feed(connection, prefetch=max(prefetch, 1))
    connection.close_callbacks.add(lambda *_: feed.closed.set())
    try:
        arguments = queue_arguments(topology)
        for tool in tools:
            channel = await connection.channel()
            channel.close_callbacks.add(lambda *_: feed.closed.set())
            await channel.set_qos(prefetch_count=feed.prefetch)
            exchange = await channel.declare_exchange(topology.exchange, aio_pika.ExchangeType.DIRECT, durable=True)
            queue = await channel.declare_queue(topology.tool_queue_prefix + tool, durable=True, arguments=arguments)
            await queue.bind(exchange, routing_key=tool)

            async def deliver(message: AbstractIncomingMessage, tool: str = tool) -> None:
                await handler(tool, message)

            tag = f"{worker_id}/{tool}"
            await queue.consume(deliver, no_ack=False, consumer_tag=tag)
            feed.channels[tool] = channel
            feed.consumers[tool] = _Consumer(queue, deliver, tag)
    except BaseException:
        await feed.close()
        raise
    logger.info("consuming jobs from RabbitMQ (%s)", ", ".join(topology.tool_queue_prefix + t for t in tools))
    return feed


def traceparent_of(message: AbstractIncomingMessage) -> object:
    headers = message.headers or {}
    return headers.get("traceparent")


# An acknowledgement on a connection that is going away can wait forever
# (aiormq leaves its future pending when the reader exits): bounded, it
# fails like any other lost acknowledgement.
BROKER_CALL_TIMEOUT = 5.0


async def ack(message: AbstractIncomingMessage) -> None:
    """Acknowledge failures are worth a log line only: an unacknowledged
    delivery is redelivered, and the claim makes a redelivery harmless."""
    try:
        await asyncio.wait_for(message.ack(), BROKER_CALL_TIMEOUT)
    except Exception as error:
        logger.debug("ack failed (%s); the job will be redelivered and refused", error)


async def requeue(message: AbstractIncomingMessage) -> None:
    try:
        await asyncio.wait_for(message.nack(requeue=True), BROKER_CALL_TIMEOUT)
    except Exception as error:
        logger.debug("requeue failed (%s); the broker redelivers on reconnect", error)


async def reject(message: AbstractIncomingMessage) -> None:
    try:
        await asyncio.wait_for(message.reject(requeue=False), BROKER_CALL_TIMEOUT)
    except Exception as error:
        logger.debug("reject failed: %s", error)
