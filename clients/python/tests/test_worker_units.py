"""Pieces of the worker checked alone: queue arguments keep their AMQP types
(against the real RabbitMQ), error reasons, durations, trace context, retry policies."""

from __future__ import annotations

import argparse
import uuid

import aio_pika
import aiormq
import pamqp.encode
import pika
import pytest

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.errors import error_info_reason
from mcp_taskstore.worker import RetryPolicy, Tools, broker
from mcp_taskstore.worker.cli import parse_duration
from mcp_taskstore.worker.rpc import valid_traceparent

import services

pytestmark = pytest.mark.anyio


async def test_queue_arguments_keep_their_amqp_types() -> None:
    prefix = f"py-types-{uuid.uuid4().hex[:8]}"
    queue = f"{prefix}.tool.typed"
    arguments = {"x-queue-type": "classic", "x-queue-version": 2}
    # As taskworker --queue-type classic declares it (lapin: a long int; pika writes ints the same way).
    connection = pika.BlockingConnection(pika.URLParameters(services.AMQP_URL))
    connection.channel().queue_declare(queue=queue, durable=True, arguments=arguments)
    connection.close()
    try:
        topology = xpb.QueueTopology(
            exchange=f"{prefix}.jobs",
            tool_queue_prefix=f"{prefix}.tool.",
            queue_arguments=[
                xpb.QueueArgument(name="x-queue-type", text="classic"),
                xpb.QueueArgument(name="x-queue-version", integer=2),
            ],
        )

        async def nothing(tool: str, message: object) -> None:
            raise AssertionError("no job was published")

        feed = await broker.open_feed(services.AMQP_URL, broker.AmqpTls(), topology, ["typed"], 2, "types", nothing)
        await feed.set_prefetch(0)  # no free slot: no consumer
        await feed.set_prefetch(3)
        await feed.close()
        # Another value is refused: the declaration really compares arguments.
        plain = await aio_pika.connect(services.AMQP_URL)
        try:
            channel = await plain.channel()
            with pytest.raises(aiormq.exceptions.ChannelPreconditionFailed):
                await channel.declare_queue(queue, durable=True, arguments={**arguments, "x-queue-version": 1})
        finally:
            await plain.close()
    finally:
        services.delete_amqp_topology(prefix, ["typed"])
    # On the wire: the integer as an AMQP long (I), where pamqp alone writes a short-short (b).
    assert broker.queue_arguments(topology) == arguments
    assert pamqp.encode.encode_table_value(broker.queue_arguments(topology)["x-queue-version"]) == b"I\x00\x00\x00\x02"
    assert pamqp.encode.encode_table_value(2) == b"b\x02"
    assert pamqp.encode.encode_table_value("classic") == b"S\x00\x00\x00\x07classic"


def test_the_reason_of_a_refusal() -> None:
    # google.rpc.Status{code: 9, message: "m", details: [Any{ErrorInfo{reason: FENCE_LEASE_LOST}}]}
    reason = b"FENCE_LEASE_LOST"
    info = b"\x0a" + bytes([len(reason)]) + reason + b"\x12\x08taskstore"
    url = b"type.googleapis.com/google.rpc.ErrorInfo"
    detail = b"\x0a" + bytes([len(url)]) + url + b"\x12" + bytes([len(info)]) + info
    status = b"\x08\x09\x12\x01m\x1a" + bytes([len(detail)]) + detail
    assert error_info_reason(status) == "FENCE_LEASE_LOST"
    assert error_info_reason(b"\x08\x09") is None
    assert error_info_reason(b"\xff\xff") is None


def test_durations_and_trace_context() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2s") == 2.0
    assert parse_duration("1m") == 60.0
    assert parse_duration("1h30m") == 5400.0
    for bad in ("", "5", "two seconds", "2s x"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_duration(bad)
    good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    assert valid_traceparent(good) == good
    assert valid_traceparent(good.encode()) == good
    assert valid_traceparent("00-" + "0" * 32 + "-00f067aa0ba902b7-01") is None
    assert valid_traceparent("garbage") is None
    assert valid_traceparent(None) is None


def test_a_declared_retry_policy_goes_with_the_description() -> None:
    tools = Tools()

    @tools.tool(retry=RetryPolicy(max_attempts=5, backoff_base=0.25, retry_lost_workers=False))
    async def flaky() -> str:
        return "ok"

    @tools.tool()
    async def plain() -> str:
        return "ok"

    sent = tools["flaky"].description()
    assert sent.HasField("retry")
    assert (sent.retry.max_attempts, sent.retry.backoff_base.ToMilliseconds()) == (5, 250)
    assert not sent.retry.HasField("backoff_max"), "what it leaves out is the service's"
    assert (sent.retry.retry_errors, sent.retry.retry_lost_workers) == (True, False)
    assert not tools["plain"].description().HasField("retry")
