"""Python fleet workers for the tests: ``mcp-taskstore-worker`` processes
started as users start them (the console entry point), and helpers that
create dispatched tasks and read the workers' logs."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from mcp_taskstore import Dispatch, TaskInfo, TaskStoreClient

import services

WORKER_BIN = str(Path(sys.executable).with_name("mcp-taskstore-worker"))
CONFORMANCE = "mcp_taskstore.conformance:tools"
CONFORMANCE_TOOLS = "conf_echo,conf_tool_error,conf_retryable,conf_back_off,conf_crash,conf_sleep,conf_noop,conf_ask"
TESTS = str(Path(__file__).parent)


def start_worker(
    service: services.Service,
    tools: str = CONFORMANCE,
    *,
    worker_id: str | None = None,
    concurrency: int = 4,
    grace: str = "2s",
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
    wait: bool = True,
) -> services.Process:
    """A worker process serving ``tools``; waits until it consumes (unless ``wait`` is False)."""
    args = [
        WORKER_BIN, tools,
        "--endpoint", service.endpoint,
        "--amqp-url", services.AMQP_URL,
        "--queue-prefix", service.queue_prefix,
        "--concurrency", str(concurrency),
        "--worker-id", worker_id or f"py-{uuid.uuid4().hex[:6]}",
        "--shutdown-grace", grace,
        *(extra or []),
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": TESTS, "PYTHONUNBUFFERED": "1", **(env or {})}
    process = services.spawn(args, "pyworker", env=environment)
    if wait:
        wait_for_log(process, "consuming jobs from RabbitMQ")
    return process


def wait_for_log(process: services.Process, text: str, timeout: float = 30.0, after: int = 0) -> int:
    """Waits until ``text`` is in the log (past character ``after``); returns where it ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = process.log.read_text(errors="replace")
        found = log.find(text, after)
        if found >= 0:
            return found + len(text)
        if process.proc.poll() is not None:
            raise RuntimeError(f"worker exited with {process.proc.returncode}:\n{process.tail()}")
        time.sleep(0.05)
    raise TimeoutError(f"no {text!r} in the worker's log within {timeout}s:\n{process.tail()}")


def log_size(process: services.Process) -> int:
    return len(process.log.read_text(errors="replace"))


def signal_worker(process: services.Process, sig: signal.Signals) -> None:
    process.proc.send_signal(sig)


def tools_call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}


async def dispatch(
    client: TaskStoreClient, tool: str, arguments: dict[str, Any], *, max_attempts: int | None = None
) -> TaskInfo:
    return await client.create_task(
        request_json=tools_call(tool, arguments),
        request_id=1,
        ttl=timedelta(minutes=10),
        dispatch=Dispatch(tool=tool, max_attempts=max_attempts),
    )
