"""Pieces of the worker checked alone: queue arguments keep their AMQP types
(against the real RabbitMQ), error reasons, durations, trace context, retry policies,
concurrency limits."""

from __future__ import annotations

import argparse
import asyncio
import re
import uuid
from collections.abc import Callable

import aio_pika
import aiormq
import grpc
import pamqp.encode
import pika
import pytest

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.errors import FailedPreconditionError, NotFoundError, UnavailableError, error_info, error_info_reason
from mcp_taskstore.worker import ConcurrencyLimit, RateLimit, RetryPolicy, Tools, broker, make_tool
from mcp_taskstore.worker.cli import parse_duration
from mcp_taskstore.worker.control import Stop
from mcp_taskstore.worker.report import stop_of_refusal
from mcp_taskstore.worker.rpc import valid_traceparent
from mcp_taskstore.worker.runtime import _first_of

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


def _field(number: int, value: bytes) -> bytes:
    return bytes([number << 3 | 2, len(value)]) + value


def test_the_metadata_of_a_refusal() -> None:
    # ErrorInfo{reason: FENCE_TERMINAL, domain: mcp-taskstore, metadata: {status: cancelled}}
    entry = _field(1, b"status") + _field(2, b"cancelled")
    info = _field(1, b"FENCE_TERMINAL") + _field(2, b"mcp-taskstore") + _field(3, entry)
    detail = _field(1, b"type.googleapis.com/google.rpc.ErrorInfo") + _field(2, info)
    status = b"\x08\x09" + _field(2, b"m") + _field(3, detail)
    assert error_info(status) == ("FENCE_TERMINAL", {"status": "cancelled"})
    assert error_info(b"\x08\x09") == (None, {})
    # A detail of another type is not read as an ErrorInfo.
    other = _field(1, b"type.googleapis.com/google.rpc.RetryInfo") + _field(2, info)
    assert error_info(b"\x08\x09" + _field(3, other)) == (None, {})


def test_a_refused_report_stops_the_attempt_only_when_the_attempt_is_over() -> None:
    def refused(reason: str | None, metadata: dict[str, str] | None = None) -> FailedPreconditionError:
        return FailedPreconditionError(grpc.StatusCode.FAILED_PRECONDITION, "refused", reason, metadata)

    assert stop_of_refusal(refused("FENCE_TERMINAL", {"status": "cancelled"})) is Stop.CANCELLED
    assert stop_of_refusal(refused("FENCE_TERMINAL", {"status": "completed"})) is Stop.FINISHED
    assert stop_of_refusal(refused("FENCE_TERMINAL")) is Stop.FINISHED
    assert stop_of_refusal(refused("FENCE_LEASE_LOST")) is Stop.LEASE_LOST
    assert stop_of_refusal(NotFoundError(grpc.StatusCode.NOT_FOUND, "no such task")) is Stop.GONE
    # Refusals that do not say the attempt is over, and outages, stop nothing.
    assert stop_of_refusal(refused("QUESTION_KEY_REUSED")) is None
    assert stop_of_refusal(refused(None)) is None
    assert stop_of_refusal(UnavailableError(grpc.StatusCode.UNAVAILABLE, "down", "FENCE_LEASE_LOST")) is None


async def test_the_first_session_wait_ends_at_the_first_of_its_events() -> None:
    # The worker waits for its session to open, or to be told to stop, at most a while.
    opened, stopped = asyncio.Event(), asyncio.Event()
    assert not await _first_of(opened, stopped, seconds=0.05)
    asyncio.get_running_loop().call_later(0.01, stopped.set)
    assert await asyncio.wait_for(_first_of(opened, stopped, seconds=60), 10)
    assert await _first_of(opened, stopped, seconds=60)  # already set


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


def test_a_declared_concurrency_limit_goes_with_the_description() -> None:
    tools = Tools()

    @tools.tool(concurrency=ConcurrencyLimit(3, key="tenant, arguments.customer_id"))
    async def per_customer(customer_id: str) -> str:
        return customer_id

    @tools.tool(retry=RetryPolicy(max_attempts=2), concurrency=ConcurrencyLimit(max=10_000))
    async def whole_tool() -> str:
        return "ok"

    @tools.tool()
    async def plain() -> str:
        return "ok"

    sent = tools["per_customer"].description()
    assert sent.HasField("concurrency")
    assert (sent.concurrency.max, sent.concurrency.key) == (3, "tenant, arguments.customer_id")
    assert not sent.HasField("retry"), "a limit declares no retry policy"
    whole = tools["whole_tool"].description()
    assert (whole.concurrency.max, whole.concurrency.key) == (10_000, ""), "no key: one for the whole tool"
    assert whole.retry.max_attempts == 2
    assert not tools["plain"].description().HasField("concurrency")
    # On the wire: field 7 of ToolDescription, as the service reads it.
    decoded = xpb.ToolDescription.FromString(sent.SerializeToString())
    assert decoded.concurrency == xpb.ConcurrencyLimit(max=3, key="tenant, arguments.customer_id")
    # make_tool takes it as the decorator does.
    made = make_tool(plain, name="made", concurrency=ConcurrencyLimit(1, "session")).description()
    assert (made.concurrency.max, made.concurrency.key) == (1, "session")


@pytest.mark.parametrize(
    "key",
    ["", "tenant", "tool, session", " tenant , arguments.customer.id ", "arguments.a-b_C9", ",".join(["tenant"] * 8),
     "arguments." + ".".join(["n"] * 8), "arguments." + "x" * 64, "tenant" + " " * 250],
)  # fmt: skip
def test_concurrency_keys_the_service_takes(key: str) -> None:
    assert ConcurrencyLimit(1, key).message().key == key


@pytest.mark.parametrize(
    ("declare", "error", "says"),
    [
        (lambda: ConcurrencyLimit(0), ValueError, "between 1 and 10000, got 0"),
        (lambda: ConcurrencyLimit(10_001), ValueError, "between 1 and 10000, got 10001"),
        (lambda: ConcurrencyLimit(-1), ValueError, "between 1 and 10000"),
        (lambda: ConcurrencyLimit(2.5), TypeError, "must be an int"),  # type: ignore[arg-type]
        (lambda: ConcurrencyLimit("3"), TypeError, "must be an int"),  # type: ignore[arg-type]
        (lambda: ConcurrencyLimit(True), TypeError, "must be an int"),
        (lambda: ConcurrencyLimit(3, None), TypeError, "key must be a str"),  # type: ignore[arg-type]
        (lambda: ConcurrencyLimit(3, ["tenant"]), TypeError, "key must be a str"),  # type: ignore[arg-type]
        (lambda: ConcurrencyLimit(3, "tenant" + " " * 251), ValueError, "at most 256 characters, got 257"),
        (lambda: ConcurrencyLimit(3, "customer_id"), ValueError, "term 'customer_id' is not tenant"),
        (lambda: ConcurrencyLimit(3, "tenant,"), ValueError, "term '' is not"),
        (lambda: ConcurrencyLimit(3, "arguments."), ValueError, "term 'arguments.' is not"),
        (lambda: ConcurrencyLimit(3, "arguments.a..b"), ValueError, "is not tenant"),
        (lambda: ConcurrencyLimit(3, "arguments.a b"), ValueError, "is not tenant"),
        (lambda: ConcurrencyLimit(3, "arguments.é"), ValueError, "is not tenant"),
        (lambda: ConcurrencyLimit(3, "arguments." + "x" * 65), ValueError, "is not tenant"),
        (lambda: ConcurrencyLimit(3, "arguments." + ".".join(["n"] * 9)), ValueError, "is not tenant"),
        (lambda: ConcurrencyLimit(3, ",".join(["tool"] * 9)), ValueError, "more than 8 terms"),
        (lambda: make_tool(lambda: "x", concurrency=3), TypeError, "must be a ConcurrencyLimit"),  # type: ignore[arg-type]
        (lambda: Tools().tool(concurrency={"max": 3})(lambda: "x"), TypeError, "must be a ConcurrencyLimit"),  # type: ignore[arg-type]
    ],
)
def test_a_concurrency_limit_the_service_would_refuse_is_refused_at_declaration(
    declare: Callable[[], object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        declare()


def test_a_declared_rate_goes_with_the_description() -> None:
    tools = Tools()

    @tools.tool(rate=RateLimit(20, 1.0, key="tenant"), concurrency=ConcurrencyLimit(3))
    async def quotes() -> str:
        return "ok"

    @tools.tool()
    async def plain() -> str:
        return "ok"

    # On the wire: field 8 of ToolDescription, as the service reads it.
    sent = xpb.ToolDescription.FromString(tools["quotes"].description().SerializeToString())
    assert (sent.rate.starts, sent.rate.per.ToMilliseconds(), sent.rate.key) == (20, 1000, "tenant")
    assert sent.concurrency.max == 3, "a rate and a limit go together"
    assert not tools["plain"].description().HasField("rate")
    made = make_tool(plain, name="made", rate=RateLimit(1, 0.01)).description()
    assert (made.rate.starts, made.rate.per.ToMilliseconds(), made.rate.key) == (1, 10, "")


@pytest.mark.parametrize(
    ("declare", "error", "says"),
    [
        (lambda: RateLimit(0, 1.0), ValueError, "between 1 and 100000, got 0"),
        (lambda: RateLimit(100_001, 1.0), ValueError, "between 1 and 100000"),
        (lambda: RateLimit(2.5, 1.0), TypeError, "must be an int"),  # type: ignore[arg-type]
        (lambda: RateLimit(True, 1.0), TypeError, "must be an int"),
        (lambda: RateLimit(5, 0.001), ValueError, "between 10 ms and 24 h"),
        (lambda: RateLimit(5, 86_401), ValueError, "between 10 ms and 24 h"),
        (lambda: RateLimit(5, float("nan")), ValueError, "between 10 ms and 24 h"),
        (lambda: RateLimit(5, "1s"), TypeError, "must be seconds"),  # type: ignore[arg-type]
        (lambda: RateLimit(5, 1.0, "customer_id"), ValueError, "RateLimit.key term 'customer_id' is not tenant"),
        (lambda: RateLimit(5, 1.0, None), TypeError, "RateLimit.key must be a str"),  # type: ignore[arg-type]
        (lambda: make_tool(lambda: "x", rate=20), TypeError, "must be a RateLimit"),  # type: ignore[arg-type]
    ],
)
def test_a_rate_the_service_would_refuse_is_refused_at_declaration(
    declare: Callable[[], object], error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        declare()


def test_a_back_off_carries_the_time_its_key_may_start_again() -> None:
    from datetime import datetime, timedelta, timezone

    from mcp_taskstore.worker import BackOff

    before = datetime.now(timezone.utc)
    back_off = BackOff.after(30, "rate limited")
    assert str(back_off) == "rate limited"
    assert before + timedelta(seconds=30) <= back_off.until <= datetime.now(timezone.utc) + timedelta(seconds=30)
    assert str(BackOff(datetime(2030, 1, 1, tzinfo=timezone.utc))) == "backing off"
    with pytest.raises(ValueError):
        BackOff.after(-1)
    with pytest.raises(ValueError):
        BackOff.after(float("nan"))
    with pytest.raises(ValueError, match="time zone"):
        BackOff(datetime(2030, 1, 1))


def test_a_declared_fairness_key_goes_with_the_description() -> None:
    tools = Tools()

    @tools.tool(fairness_key="arguments.customer_id")
    async def per_customer(customer_id: str) -> str:
        return customer_id

    @tools.tool()
    async def plain() -> str:
        return "ok"

    sent = tools["per_customer"].description()
    assert sent.fairness_key == "arguments.customer_id"
    assert tools["plain"].description().fairness_key == "", "none declared: first in, first out"
    # On the wire: field 9 of ToolDescription, as the service reads it.
    assert xpb.ToolDescription.FromString(sent.SerializeToString()).fairness_key == "arguments.customer_id"
    assert make_tool(plain, name="made", fairness_key="session").description().fairness_key == "session"


@pytest.mark.parametrize(
    ("key", "error", "says"),
    [
        ("customer_id", ValueError, "fairness_key term 'customer_id' is not tenant"),
        ("arguments.a b", ValueError, "is not tenant"),
        ("tenant" + " " * 251, ValueError, "fairness_key must be at most 256 characters"),
        (",".join(["tool"] * 9), ValueError, "more than 8 terms"),
        (["tenant"], TypeError, "fairness_key must be a str"),
    ],
)
def test_a_fairness_key_the_service_would_refuse_is_refused_at_declaration(
    key: object, error: type[Exception], says: str
) -> None:
    with pytest.raises(error, match=re.escape(says)):
        make_tool(lambda: "x", fairness_key=key)  # type: ignore[arg-type]
