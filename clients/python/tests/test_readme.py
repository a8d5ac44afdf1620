"""The README's worker example, run as written: its code block becomes
my_tools.py, `mcp-taskstore-worker my_tools:tools` serves it, and each tool
does what the README says."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_taskstore import TaskStatus, TaskStoreClient

import services
from workers import TESTS, dispatch, start_worker

pytestmark = pytest.mark.anyio

README = Path(__file__).parents[1] / "README.md"
REPOSITORY_README = Path(__file__).parents[3] / "README.md"


def example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    (block,) = [b for b in blocks if b.startswith("# my_tools.py")]
    return block


def test_the_repository_readme_shows_the_example_run_here() -> None:
    """The repository's polyglot section repeats this example: the copy
    must be the one this module runs."""
    assert example() in REPOSITORY_README.read_text()


@pytest.fixture(scope="module")
def service() -> Iterator[services.Service]:
    service = services.start_serve(
        worker_tools="count,confirm,flaky", worker=False, extra=["--retry-backoff-base", "100ms"]
    )
    yield service
    service.stop()


async def test_the_readme_worker_example(service: services.Service, tmp_path: Path) -> None:
    (tmp_path / "my_tools.py").write_text(example())
    worker = start_worker(service, "my_tools:tools", env={"PYTHONPATH": f"{tmp_path}:{TESTS}"})
    try:
        async with TaskStoreClient(service.endpoint) as client:
            tools = {tool.name: tool for tool in await client.list_tools()}
            assert (
                tools["count"].title == "Count"
                and tools["count"].description == "Counts, a step every 0.2 s, reporting each."
            )
            assert tools["count"].input_schema["required"] == ["to"]

            counting = await dispatch(client, "count", {"to": 3})
            messages = [update.status_message async for update in client.watch_task(counting.task_id)]
            counted = await client.get_task_result(counting.task_id)
            assert counted.result()["content"][0]["text"] == "counted to 3"
            assert "counted 1 of 3" in messages and "counted 2 of 3" in messages, messages

            asking = await dispatch(client, "confirm", {"action": "delete"})
            async for update in client.watch_task(asking.task_id):
                if update.status is TaskStatus.INPUT_REQUIRED:
                    assert update.status_message == "Really delete?"
                    break
            await client.answer_input_requests(
                asking.task_id, {"confirm": {"action": "accept", "content": {"sure": True}}}
            )
            confirmed = await client.get_task_result(asking.task_id, wait=True, timeout=30)
            assert confirmed.result()["content"][0]["text"] == "delete: done"

            failing = await dispatch(client, "flaky", {})
            failed = await client.get_task_result(failing.task_id, wait=True, timeout=30)
            assert failed.status is TaskStatus.FAILED
            assert failed.task.status_message == "upstream says no"
            assert failed.result() == {"content": [{"type": "text", "text": "upstream says no"}], "isError": True}
        assert "attempt 2 of 3 started" in worker.log.read_text()
    finally:
        worker.stop()
