"""The Python fleet worker (``mcp-taskstore-worker mcp_taskstore.conformance:tools``)
against a real `serve` (PostgreSQL, RabbitMQ) with a short lease: the cases
of docs/worker-conformance.md, from the outside (gRPC and signals only)."""

from __future__ import annotations

import asyncio
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator

import pika
import pytest
from pika.exceptions import ChannelClosedByBroker

from mcp_taskstore import ClientOptions, InvalidArgumentError, TaskStatus, TaskStoreClient
from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore._proto import task_store_pb2 as pb
from mcp_taskstore.worker import ConcurrencyLimit, RateLimit, Tools
from mcp_taskstore.worker.heartbeat import Heartbeat
from mcp_taskstore.worker.rpc import WorkerRpc

import services
from workers import CONFORMANCE_TOOLS, dispatch, log_size, start_worker, wait_for_log

pytestmark = pytest.mark.anyio

LEASE = 2.0
REAPER = 0.5


@pytest.fixture(scope="module")
def service() -> Iterator[services.Service]:
    service = services.start_serve(
        worker_tools=CONFORMANCE_TOOLS + ",slow_fleet,stubborn",
        extra=["--lease-duration", "2s", "--reaper-interval", "500ms", "--retry-backoff-base", "100ms"],
        worker=False,
    )
    yield service
    service.stop()


@pytest.fixture(scope="module")
def worker(service: services.Service) -> Iterator[services.Process]:
    process = start_worker(service, worker_id="py-main", extra=["--metrics-listen", "127.0.0.1:0"])
    yield process
    process.stop()


@pytest.fixture
async def client(service: services.Service) -> AsyncIterator[TaskStoreClient]:
    async with TaskStoreClient(service.endpoint) as client:
        yield client


async def result_of(client: TaskStoreClient, task_id: str, timeout: float = 30) -> tuple[TaskStatus, dict, str | None]:
    stored = await client.get_task_result(task_id, wait=True, timeout=timeout)
    return stored.status, stored.result(), stored.task.status_message


def text(result: dict) -> str:
    return "".join(item.get("text", "") for item in result["content"])


async def test_tools_appear_with_their_descriptions(worker: services.Process, client: TaskStoreClient) -> None:
    tools = {tool.name: tool for tool in await client.list_tools()}
    assert set(CONFORMANCE_TOOLS.split(",")) <= set(tools)
    sleep = tools["conf_sleep"]
    assert sleep.workers == 1 and sleep.slots == 4
    assert sleep.description and "progress" in sleep.description
    assert sleep.input_schema is not None
    assert sleep.input_schema["required"] == ["ms"]
    assert sleep.input_schema["properties"]["step_ms"]["default"] == 100
    status = subprocess.run(
        [services.taskstore_bin(), "status", "--endpoint", client.options.endpoint],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "conf_sleep" in status.stdout, status.stdout + status.stderr


async def test_a_declared_concurrency_limit_reaches_the_service(service: services.Service) -> None:
    """The worker's heartbeat carries the limit, and the service keeps it
    (ListTools gives it back, its key normalised by the service); the
    declarations the library refuses, the service refuses too."""
    tools = Tools()

    @tools.tool(concurrency=ConcurrencyLimit(3, key="tenant, arguments.customer_id"), rate=RateLimit(20, 1.5, "tenant"))
    async def py_limited(customer_id: str) -> str:
        return customer_id

    @tools.tool()
    async def py_unlimited() -> str:
        return "ok"

    rpc = WorkerRpc(ClientOptions(endpoint=service.endpoint))
    heartbeat = Heartbeat(rpc, service.endpoint, "py-limits", [tool.description() for tool in tools], 1, lambda: 0)
    try:
        await heartbeat.send()
        try:
            listed = {t.name: t for t in (await rpc.store("ListTools", pb.ListToolsRequest())).tools}
            limited = listed["py_limited"].description
            assert limited.HasField("concurrency")
            assert (limited.concurrency.max, limited.concurrency.key) == (3, "tenant,arguments.customer_id")
            assert (limited.rate.starts, limited.rate.per.ToMilliseconds(), limited.rate.key) == (20, 1500, "tenant")
            assert not listed["py_unlimited"].description.HasField("concurrency")
        finally:
            await heartbeat.send(stopping=True)
        # What ConcurrencyLimit refuses at declaration, sent as is: the service refuses the heartbeat.
        refused = [(0, ""), (10_001, ""), (3, "customer_id"), (3, "tenant" + " " * 251), (3, ",".join(["tool"] * 9))]
        for max_, key in refused:
            with pytest.raises(ValueError):
                ConcurrencyLimit(max_, key)
            bad = xpb.ToolDescription(
                name="py_limited",
                input_schema_json='{"type":"object"}',
                concurrency=xpb.ConcurrencyLimit(max=max_, key=key),
            )
            request = xpb.HeartbeatRequest(worker_id="py-limits", tools=["py_limited"], slots=1, descriptions=[bad])
            with pytest.raises(InvalidArgumentError, match="concurrency"):
                await rpc.heartbeat(request)
        # And what RateLimit refuses.
        for starts, per_ms in [(0, 1000), (100_001, 1000), (5, 1), (5, 86_400_001)]:
            with pytest.raises(ValueError):
                RateLimit(starts, per_ms / 1000)
            bad = xpb.ToolDescription(name="py_limited", input_schema_json='{"type":"object"}')
            bad.rate.starts = starts
            bad.rate.per.FromMilliseconds(per_ms)
            request = xpb.HeartbeatRequest(worker_id="py-limits", tools=["py_limited"], slots=1, descriptions=[bad])
            with pytest.raises(InvalidArgumentError, match="rate"):
                await rpc.heartbeat(request)
    finally:
        await rpc.close()


async def test_results_tool_errors_and_retries(worker: services.Process, client: TaskStoreClient) -> None:
    echo = await dispatch(client, "conf_echo", {"text": "from python"})
    failing = await dispatch(client, "conf_tool_error", {})
    retried = await dispatch(client, "conf_retryable", {"fail_times": 2}, max_attempts=3)
    status, result, _ = await result_of(client, echo.task_id)
    assert (status, result) == (
        TaskStatus.COMPLETED,
        {"content": [{"type": "text", "text": "from python"}], "isError": False},
    )
    status, result, message = await result_of(client, failing.task_id)
    assert (status, text(result), result["isError"], message) == (TaskStatus.FAILED, "tool error", True, "tool error")
    status, result, _ = await result_of(client, retried.task_id)
    assert (status, text(result)) == (TaskStatus.COMPLETED, "succeeded on attempt 3")


async def test_arguments_the_schema_refuses(worker: services.Process, client: TaskStoreClient) -> None:
    """The tool's schema, as the worker describes it, refuses them twice: at
    creation, by the service, while a worker serves the tool; and by the
    worker itself, for a task created when none did (the service then takes
    any arguments)."""
    with pytest.raises(InvalidArgumentError, match="arguments.text"):
        await dispatch(client, "conf_echo", {"text": 42, "extra": 1})
    unserved = services.start_serve(worker=False, worker_tools="conf_echo")
    try:
        async with TaskStoreClient(unserved.endpoint) as fresh:
            invalid = await dispatch(fresh, "conf_echo", {"text": 42, "extra": 1})
            unserved.processes.append(start_worker(unserved))
            status, result, _ = await result_of(fresh, invalid.task_id)
        assert status is TaskStatus.FAILED and text(result).startswith("invalid arguments for conf_echo"), result
    finally:
        unserved.stop()


async def test_progress_is_seen_by_a_watcher(worker: services.Process, client: TaskStoreClient) -> None:
    task = await dispatch(client, "conf_sleep", {"ms": 600})
    messages = [update.status_message async for update in client.watch_task(task.task_id)]
    assert "step 1" in messages and "step 2" in messages, messages
    assert any(m and m.startswith("running on py-main (attempt 1 of") for m in messages), messages
    status, result, _ = await result_of(client, task.task_id)
    assert (status, text(result)) == (TaskStatus.COMPLETED, "slept 600 ms")


async def test_a_question_is_answered(worker: services.Process, client: TaskStoreClient) -> None:
    task = await dispatch(client, "conf_ask", {})
    async for update in client.watch_task(task.task_id):
        if update.status is TaskStatus.INPUT_REQUIRED:
            break
    questions = await client.list_input_requests(task.task_id)
    assert [q.key for q in questions] == ["confirm"]
    assert questions[0].request["params"]["message"] == "Proceed?"
    await client.answer_input_requests(task.task_id, {"confirm": {"action": "accept", "content": {}}})
    status, result, _ = await result_of(client, task.task_id)
    assert (status, text(result)) == (TaskStatus.COMPLETED, "answered accept")


async def test_a_cancellation_reaches_the_tool_within_a_second(
    worker: services.Process, client: TaskStoreClient
) -> None:
    task = await dispatch(client, "conf_sleep", {"ms": 60_000})
    async for update in client.watch_task(task.task_id):
        if update.status_message == "step 2":
            break
    mark = log_size(worker)
    cancelled_at = time.monotonic()
    await client.cancel_task(task.task_id)
    await asyncio.to_thread(
        wait_for_log, worker, f"task {task.task_id}: attempt stopped (the task was cancelled)", 5.0, mark
    )
    assert time.monotonic() - cancelled_at < 1.0
    # Its progress stopped with it (a later update would have been refused anyway).
    info = await client.get_task(task.task_id)
    assert info.status is TaskStatus.CANCELLED
    # The slot is free: a job runs at once.
    echo = await dispatch(client, "conf_echo", {"text": "after"})
    assert (await result_of(client, echo.task_id, 10))[0] is TaskStatus.COMPLETED


async def test_a_tool_that_ignores_its_cancellation_is_abandoned_after_the_grace(
    service: services.Service, client: TaskStoreClient
) -> None:
    stubborn = start_worker(service, "fleet_tools:tools", extra=["--cancel-grace", "500ms"])
    try:
        task = await dispatch(client, "stubborn", {})
        async for update in client.watch_task(task.task_id):
            if update.status_message == "ignoring cancellations":
                break
        mark = log_size(stubborn)
        await client.cancel_task(task.task_id)
        await asyncio.to_thread(
            wait_for_log, stubborn, "did not stop within 0.5s of its cancellation; abandoned", 5.0, mark
        )
        await asyncio.to_thread(wait_for_log, stubborn, "attempt stopped (the task was cancelled)", 5.0, mark)
    finally:
        stubborn.stop()


async def test_metrics(worker: services.Process, client: TaskStoreClient) -> None:
    echo = await dispatch(client, "conf_echo", {"text": "counted"})
    await result_of(client, echo.task_id)
    listening = worker.log.read_text()
    address = listening.split("serving metrics on http://", 1)[1].split("/metrics", 1)[0]
    assert not address.endswith(":0")
    body = await asyncio.to_thread(
        lambda: urllib.request.urlopen(f"http://{address}/metrics", timeout=5).read().decode()
    )
    assert 'taskworker_attempts_total{outcome="completed",tool="conf_echo"}' in body
    assert "taskworker_slots 4.0" in body
    ready = await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://{address}/readyz", timeout=5).status)
    assert ready == 200


def test_a_bad_key_stops_the_worker_saying_why(service: services.Service) -> None:
    keyed = services.start_serve(worker=False, auth="api-keys", worker_tools="conf_echo")
    try:
        key = services.create_api_key(keyed.database_url, role="worker")
        good = start_worker(keyed, env={"TASKWORKER_TOKEN": key})
        good.stop()
        bad = start_worker(keyed, env={"TASKWORKER_TOKEN": "tsk_not_a_key"}, wait=False)
        assert bad.proc.wait(timeout=30) == 1
        assert "refused this worker's credentials" in bad.log.read_text()
    finally:
        keyed.stop()


async def test_a_fleet_of_classic_queues(service: services.Service) -> None:
    """A service run with ``--queue-type classic`` announces classic queues:
    the Python worker declares its queues as the service says (whatever its
    own ``--queue-type``, a mismatch logged) and serves beside a taskworker
    run with ``--queue-type classic``."""
    classic = services.start_serve(worker=False, worker_tools="conf_echo,echo", extra=["--queue-type", "classic"])
    try:
        rust = services.spawn(
            [
                services.taskworker_bin(), "--endpoint", classic.endpoint, "--amqp-url", services.AMQP_URL,
                "--queue-prefix", classic.queue_prefix, "--queue-type", "classic", "--tools", "echo",
            ],  # fmt: skip
            "worker",
        )
        classic.processes.append(rust)
        python = start_worker(classic, extra=["--queue-type", "quorum"])
        classic.processes.append(python)
        assert "--queue-type quorum differs from the service's (classic); using the service's" in python.log.read_text()
        # The queue is classic: redeclared as classic it is accepted, as quorum refused.
        connection = pika.BlockingConnection(pika.URLParameters(services.AMQP_URL))
        try:
            queue = f"{classic.queue_prefix}.tool.conf_echo"
            arguments = {"x-queue-type": "classic", "x-queue-version": 2}
            connection.channel().queue_declare(queue=queue, durable=True, arguments=arguments)
            with pytest.raises(ChannelClosedByBroker):
                connection.channel().queue_declare(queue=queue, durable=True, arguments={"x-queue-type": "quorum"})
        finally:
            connection.close()
        async with TaskStoreClient(classic.endpoint) as client:
            by_python = await dispatch(client, "conf_echo", {"text": "classic"})
            by_rust = await dispatch(client, "echo", {"text": "classic"})
            for task in (by_python, by_rust):
                status, _, _ = await result_of(client, task.task_id)
                assert status is TaskStatus.COMPLETED
        assert rust.proc.poll() is None, rust.tail()
    finally:
        classic.stop()
