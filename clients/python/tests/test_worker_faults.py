"""The Python worker under faults (docs/worker-conformance.md, cases 4, 8, 9):
a poison job, a stale lease fenced, a graceful stop that gives the task back;
and a broker outage, told once. Workers are processes; the test only signals
them, cuts their broker connection and talks gRPC."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlparse

import pytest

from mcp_taskstore import TaskStatus, TaskStoreClient

import services
from tcp_proxy import TcpProxy
from workers import CONFORMANCE_TOOLS, dispatch, log_size, start_worker, wait_for_log

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def service() -> Iterator[services.Service]:
    service = services.start_serve(
        worker_tools=CONFORMANCE_TOOLS,
        extra=["--lease-duration", "2s", "--reaper-interval", "500ms"],
        worker=False,
    )
    yield service
    service.stop()


@pytest.fixture(scope="module", autouse=True)
def queues(service: services.Service) -> None:
    """Declares the tools' queues (a worker that comes and goes), so a job
    dispatched before a worker runs is queued at once, not offered again
    after the outbox's 5 s."""
    start_worker(service).stop()


@pytest.fixture
async def client(service: services.Service) -> AsyncIterator[TaskStoreClient]:
    async with TaskStoreClient(service.endpoint) as client:
        yield client


@pytest.fixture
def started() -> Iterator[list[services.Process]]:
    processes: list[services.Process] = []
    yield processes
    for process in processes:
        if process.proc.poll() is None:
            process.proc.send_signal(signal.SIGCONT)
        process.stop()


async def until(client: TaskStoreClient, task_id: str, message: str) -> None:
    async for update in client.watch_task(task_id):
        if update.status_message and update.status_message.startswith(message):
            return
    raise AssertionError(f"the task ended before {message!r}")


async def test_a_poison_job_fails_after_its_attempts(
    service: services.Service, client: TaskStoreClient, started: list[services.Process]
) -> None:
    task = await dispatch(client, "conf_crash", {}, max_attempts=2)
    for _ in range(2):
        worker = start_worker(service, wait=False)
        started.append(worker)
        assert await asyncio.to_thread(worker.proc.wait, 30) == 137
    stored = await client.get_task_result(task.task_id, wait=True, timeout=30)
    assert stored.status is TaskStatus.FAILED
    assert stored.task.status_message is not None
    assert stored.task.status_message.startswith("failed after 2 attempts"), stored.task.status_message
    assert stored.result()["isError"] is True


async def test_a_stale_lease_is_fenced(
    service: services.Service, client: TaskStoreClient, started: list[services.Process]
) -> None:
    # One slot, busy: no consumer while frozen (a worker with free slots
    # would hold a prefetched job until the broker's heartbeat gave up on it).
    first = start_worker(service, worker_id="py-frozen", concurrency=1)
    started.append(first)
    task = await dispatch(client, "conf_sleep", {"ms": 1500, "step_ms": 100})
    await until(client, task.task_id, "step 2")
    first.proc.send_signal(signal.SIGSTOP)
    # The frozen worker stops renewing: the reaper dispatches the task again.
    second = start_worker(service, worker_id="py-second")
    started.append(second)
    await asyncio.to_thread(wait_for_log, second, f"task {task.task_id}: attempt 2 of ")
    mark = log_size(first)
    first.proc.send_signal(signal.SIGCONT)
    stored = await client.get_task_result(task.task_id, wait=True, timeout=30)
    assert (stored.status, stored.result()["content"][0]["text"]) == (TaskStatus.COMPLETED, "slept 1500 ms")
    # The first attempt learns it lost the lease (its renewal says so, or
    # its result is refused, whichever comes first) and stores nothing.
    for _ in range(150):
        text = first.log.read_text()[mark:]
        if f"task {task.task_id}: attempt stopped (the lease was lost" in text or "report refused" in text:
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"the frozen attempt never learned it was fenced:\n{first.tail()}")
    assert "attempt reported" not in text, text
    again = await client.get_task_result(task.task_id)
    assert again.result_json == stored.result_json


async def test_a_graceful_stop_gives_the_task_back(
    service: services.Service, client: TaskStoreClient, started: list[services.Process]
) -> None:
    leaving = start_worker(service, worker_id="py-leaving", grace="300ms")
    started.append(leaving)
    task = await dispatch(client, "conf_sleep", {"ms": 3000})
    await until(client, task.task_id, "step 1")
    leaving.proc.send_signal(signal.SIGTERM)
    assert await asyncio.to_thread(leaving.proc.wait, 15) == 0
    assert "giving 1 task(s) back" in leaving.log.read_text()
    staying = start_worker(service, worker_id="py-staying")
    started.append(staying)
    # Released for the shutdown: the attempt does not count, so this is attempt 1 again.
    # (Read from the worker's log: conf_sleep reports `step 1` at once, so the
    # claim's "running on ..." message may be replaced before a watcher sees it.)
    await asyncio.to_thread(wait_for_log, staying, f"task {task.task_id}: attempt 1 of ")
    stored = await client.get_task_result(task.task_id, wait=True, timeout=30)
    assert (stored.status, stored.result()["content"][0]["text"]) == (TaskStatus.COMPLETED, "slept 3000 ms")


async def test_concurrency_bounds_the_attempts_a_worker_runs(
    service: services.Service, client: TaskStoreClient, started: list[services.Process]
) -> None:
    started.append(start_worker(service, worker_id="py-two", concurrency=2))
    tasks = [await dispatch(client, "conf_sleep", {"ms": 800, "step_ms": 100}) for _ in range(4)]
    ids = {task.task_id for task in tasks}
    most = 0
    while True:
        # One snapshot of all four (a list is one read): read one by one, a
        # task could be seen running just before it ended and its successor
        # just after it started.
        page = await client.list_tasks(page_size=100)
        infos = [i for i in page.tasks if i.task_id in ids]
        assert len(infos) == len(ids), infos
        running = [
            i
            for i in infos
            if i.status is TaskStatus.WORKING and (i.status_message or "").startswith(("running on", "step"))
        ]
        most = max(most, len(running))
        if all(i.status is TaskStatus.COMPLETED for i in infos):
            break
        await asyncio.sleep(0.05)
    assert most == 2, most


async def test_a_broker_outage_is_one_warning(
    service: services.Service, client: TaskStoreClient, started: list[services.Process]
) -> None:
    """As taskworker: one WARNING when the job queue goes, one INFO when it is
    back; the AMQP library's error per reconnect attempt, and its traceback
    of the lost connection, only at debug level."""
    broker = urlparse(services.AMQP_URL)
    proxy = TcpProxy(broker.hostname or "127.0.0.1", broker.port or 5672)
    try:
        url = broker._replace(netloc=f"{broker.username}:{broker.password}@127.0.0.1:{proxy.port}").geturl()
        worker = start_worker(service, worker_id="py-outage", extra=["--amqp-url", url])
        started.append(worker)
        mark = log_size(worker)
        proxy.cut()
        # Reconnect attempts after 0.2, 0.4, 0.8 and 1.6 s: four of them fail.
        await asyncio.sleep(3.5)
        proxy.restore()
        await asyncio.to_thread(wait_for_log, worker, "job queue back; consuming again", 30, mark)
        task = await dispatch(client, "conf_echo", {"text": "after the outage"})
        stored = await client.get_task_result(task.task_id, wait=True, timeout=30)
        assert stored.status is TaskStatus.COMPLETED
        log = worker.log.read_text()[mark:]
    finally:
        proxy.close()
    warnings = [line for line in log.splitlines() if re.search(r" (WARNING|ERROR|CRITICAL) ", line)]
    assert len(warnings) == 1 and "job queue unavailable" in warnings[0], log
    assert "reconnecting with backoff until it is back" in warnings[0], log
    assert "Traceback" not in log, log
