"""A FastMCP server's tools on the fleet (``serve_on_fleet`` + ``mcp-taskstore-worker
fastmcp_app:mcp``), called through the service's ``/mcp`` and through the
FastMCP server itself, with the worker running the call SIGKILLed mid-call:
the call completes, once, on another worker. A tool that asks (``ctx.elicit``)
asks the FastMCP server's own client, and its answer goes to the task."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import ClientSession
from mcp.shared.experimental.tasks.helpers import RELATED_TASK_METADATA_KEY
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, TextContent

from mcp_taskstore import TaskStatus, TaskStoreClient

import services
from test_mcp_server import client_session
from workers import TESTS, start_worker

pytestmark = pytest.mark.anyio

APP = Path(__file__).with_name("fastmcp_app.py")


@pytest.fixture(scope="module")
def service() -> Iterator[services.Service]:
    service = services.start_serve(
        worker_tools="slow_add,shout,guarded_delete",
        extra=["--lease-duration", "2s", "--reaper-interval", "500ms", "--mcp-listen", "127.0.0.1:0"],
        worker=False,
    )
    yield service
    service.stop()


@pytest.fixture
def started() -> Iterator[list[services.Process]]:
    processes: list[services.Process] = []
    yield processes
    for process in processes:
        process.stop()


def text_of(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


def runs(path: Path) -> list[str]:
    return path.read_text().split("\n")[:-1] if path.exists() else []


async def call_with_a_worker_killed(
    session: ClientSession, service: services.Service, started: list[services.Process], log: Path, a: int, b: int
) -> CallToolResult:
    """Calls slow_add while worker A runs it, SIGKILLs A mid-call, lets B finish it."""
    env = {"FLEET_RUNS": str(log)}
    first = start_worker(service, "fastmcp_app:mcp", env=env)
    started.append(first)
    async with anyio.create_task_group() as tg:
        outcome: list[CallToolResult] = []

        async def call() -> None:
            outcome.append(await session.call_tool("slow_add", {"a": a, "b": b, "seconds": 2.0}))

        tg.start_soon(call)
        with anyio.fail_after(20):
            while not any(line.startswith(f"start {a}+{b}") for line in runs(log)):
                await anyio.sleep(0.05)
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
        started.append(start_worker(service, "fastmcp_app:mcp", env=env))
    (result,) = outcome
    return result


async def test_through_the_services_mcp(
    service: services.Service, started: list[services.Process], tmp_path: Path
) -> None:
    log = tmp_path / "runs"
    async with TaskStoreClient(service.endpoint) as client:
        with anyio.fail_after(90):
            async with client_session(services.mcp_url(service)) as session:
                started.append(start_worker(service, "fastmcp_app:mcp"))
                listed = {tool.name: tool for tool in (await session.list_tools()).tools}
                assert listed["slow_add"].inputSchema["required"] == ["a", "b"]
                assert listed["slow_add"].description == "Adds two numbers, slowly, reporting its progress."
                shouted = await session.call_tool("shout", {"text": "plain def"})
                assert text_of(shouted) == "PLAIN DEF"
                started.pop().stop()
                result = await call_with_a_worker_killed(session, service, started, log, 2, 3)
        assert not result.isError, result
        assert text_of(result) == "5"
        assert result.structuredContent == {"result": 5}
        tasks = [task async for task in client.iter_tasks(tool="slow_add")]
        assert [task.status for task in tasks] == [TaskStatus.COMPLETED]
    lines = runs(log)
    assert [line.split()[0] for line in lines] == ["start", "start", "end"], lines


@asynccontextmanager
async def fastmcp_server(service: services.Service) -> AsyncIterator[str]:
    """``fastmcp_app.py`` serving Streamable HTTP, its calls dispatched to
    ``service``'s fleet (``serve_on_fleet``); yields its ``/mcp`` URL."""
    server = subprocess.Popen(
        [sys.executable, str(APP), "--taskstore", service.endpoint],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": TESTS},
    )
    try:
        assert server.stdout is not None
        line = (await asyncio.to_thread(server.stdout.readline)).decode()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        server.kill()
        server.wait()


async def test_through_the_fastmcp_server(
    service: services.Service, started: list[services.Process], tmp_path: Path
) -> None:
    log = tmp_path / "runs"
    async with fastmcp_server(service) as url:
        with anyio.fail_after(90):
            async with client_session(url) as session:
                result = await call_with_a_worker_killed(session, service, started, log, 4, 5)
                assert not result.isError, result
                assert text_of(result) == "9"
                # A task-augmented call gets the task at once; tasks/result waits for the fleet.
                created = await session.experimental.call_tool_as_task("shout", {"text": "as a task"}, ttl=60_000)
                shouted = await session.experimental.get_task_result(created.task.taskId, CallToolResult)
                assert text_of(shouted) == "AS A TASK"
        async with TaskStoreClient(service.endpoint) as client:
            # One task per call, whatever the module ran before: each completed once.
            tasks = [task async for task in client.iter_tasks(tool="slow_add")]
            assert tasks and all(task.status is TaskStatus.COMPLETED for task in tasks), tasks
    lines = runs(log)
    assert [line.split()[0] for line in lines] == ["start", "start", "end"], lines


async def test_a_question_goes_to_the_fastmcp_servers_client(
    service: services.Service, started: list[services.Process]
) -> None:
    """``ctx.elicit`` on a worker: the FastMCP server's client is asked (an
    ``elicitation/create`` on the call's stream; for a task, on its
    tasks/result stream, naming the task), and its answer is the task's."""
    asked: list[ElicitRequestParams] = []
    answers = iter(
        [ElicitResult(action="accept", content={"approve": True}), ElicitResult(action="decline")]
    )

    async def elicitation(context: Any, params: ElicitRequestParams) -> ElicitResult:
        asked.append(params)
        return next(answers)

    started.append(start_worker(service, "fastmcp_app:mcp"))
    async with fastmcp_server(service) as url:
        # Without the relay nobody answers, and the call never returns.
        with anyio.fail_after(30):
            async with client_session(url, elicitation_callback=elicitation) as session:
                plain = await session.call_tool("guarded_delete", {"path": "/srv/a"})
                assert text_of(plain) == "deleted /srv/a", plain
                created = await session.experimental.call_tool_as_task(
                    "guarded_delete", {"path": "/srv/b"}, ttl=60_000
                )
                as_task = await session.experimental.get_task_result(created.task.taskId, CallToolResult)
                assert text_of(as_task) == "kept /srv/b (decline)", as_task
    assert [params.message for params in asked] == ["Really delete /srv/a?", "Really delete /srv/b?"]
    related = [params.meta.model_extra.get(RELATED_TASK_METADATA_KEY) if params.meta else None for params in asked]
    assert related == [None, {"taskId": created.task.taskId}]
    async with TaskStoreClient(service.endpoint) as client:
        tasks = [task async for task in client.iter_tasks(tool="guarded_delete")]
        assert len(tasks) == 2 and all(task.status is TaskStatus.COMPLETED for task in tasks), tasks
        stored = {
            task.task_id: [(q.key, q.answer) for q in await client.list_input_requests(task.task_id)]
            for task in tasks
        }
    # The answers are the tasks' own, stored in the service.
    assert stored.pop(created.task.taskId) == [("elicit-1", {"action": "decline"})]
    assert list(stored.values()) == [[("elicit-1", {"action": "accept", "content": {"approve": True}})]]


async def test_a_question_the_client_cannot_answer_waits_for_an_answer_through_taskstore(
    service: services.Service, started: list[services.Process]
) -> None:
    """A client that declared no elicitation capability is not asked: the
    question stays open, and an answer given through the service ends the call."""
    started.append(start_worker(service, "fastmcp_app:mcp"))
    async with fastmcp_server(service) as url, TaskStoreClient(service.endpoint) as client:
        with anyio.fail_after(30):
            async with client_session(url) as session, anyio.create_task_group() as tg:
                outcome: list[CallToolResult] = []

                async def call() -> None:
                    outcome.append(await session.call_tool("guarded_delete", {"path": "/srv/c"}))

                tg.start_soon(call)
                open_questions: list[tuple[str, str]] = []
                while not open_questions:
                    await anyio.sleep(0.1)
                    async for task in client.iter_tasks(tool="guarded_delete", statuses=[TaskStatus.INPUT_REQUIRED]):
                        questions = await client.list_input_requests(task.task_id)
                        open_questions += [(task.task_id, q.key) for q in questions if q.is_open]
                ((task_id, key),) = open_questions
                await client.answer_input_requests(task_id, {key: {"action": "accept", "content": {"approve": False}}})
        (result,) = outcome
        assert text_of(result) == "kept /srv/c (accept)", result
