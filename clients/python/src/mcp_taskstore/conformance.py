"""The conformance tools (docs/worker-conformance.md), which every fleet
worker implementation ships so one suite can prove them all:

    mcp-taskstore-worker mcp_taskstore.conformance:tools --endpoint ... --amqp-url ...
"""

from __future__ import annotations

import asyncio
import os
import time

from mcp.types import CallToolResult, TextContent

from mcp_taskstore.worker import BackOff, QuestionDeclined, RetryableError, RetryPolicy, ToolContext, Tools

tools = Tools()
# structured_output=False: results are exactly one text item (no structuredContent).


@tools.tool(description="Returns its text.", structured_output=False)
async def conf_echo(text: str) -> str:
    return text


@tools.tool(description="Returns a result with isError: true (the task fails, no retry).", structured_output=False)
async def conf_tool_error() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text="tool error")], isError=True)


@tools.tool(
    description="Fails retryably on attempts 1..fail_times, then succeeds.",
    structured_output=False,
    retry=RetryPolicy(max_attempts=4, backoff_base=0.05, backoff_max=0.1, retry_lost_workers=False),
)
async def conf_retryable(fail_times: int, ctx: ToolContext) -> str:
    if ctx.attempt <= fail_times:
        raise RetryableError(f"failing attempt {ctx.attempt}")
    return f"succeeded on attempt {ctx.attempt}"


# The tasks conf_back_off has backed off in this process.
_backed_off: set[str] = set()


@tools.tool(description="Backs its tool off for wait_ms on its first run of a task, then succeeds.", structured_output=False)
async def conf_back_off(wait_ms: int, ctx: ToolContext) -> str:
    if ctx.task_id not in _backed_off:
        _backed_off.add(ctx.task_id)
        raise BackOff.after(wait_ms / 1000, "rate limited upstream")
    return "ran after backing off"


@tools.tool(
    description="Ends the worker process at once (exit code 137, no cleanup): a poison task.", structured_output=False
)
async def conf_crash() -> str:
    os._exit(137)


@tools.tool(
    description="Reports progress `step <i>` at the start of each step of step_ms until ms have passed; stops when cancelled.",
    structured_output=False,
)
async def conf_sleep(ms: int, ctx: ToolContext, step_ms: int = 100) -> str:
    loop = asyncio.get_running_loop()
    end = loop.time() + ms / 1000
    step = 0
    # `step <i>` at the start of each step, so `step 1` comes at once.
    while (left := end - loop.time()) > 0:
        step += 1
        await ctx.progress(f"step {step}")
        # A cancellation raises CancelledError here: the tool stops, returning nothing.
        await asyncio.sleep(min(step_ms / 1000, left))
    return f"slept {ms} ms"


@tools.tool(
    description=(
        "Does nothing (for ms milliseconds, default 0, silently); returns the Unix time in microseconds"
        " at which it started (benches/polyglot.sh, benches/idle.sh)."
    ),
    structured_output=False,
)
async def conf_noop(n: int = 0, ms: int = 0) -> str:
    started = time.time_ns() // 1000
    if ms > 0:
        # Silent: no progress, so that a running task costs only what the worker library costs.
        await asyncio.sleep(ms / 1000)
    return str(started)


@tools.tool(description="Asks `Proceed?` (key confirm) and returns `answered <action>`.", structured_output=False)
async def conf_ask(ctx: ToolContext) -> str:
    request = {
        "method": "elicitation/create",
        "params": {"message": "Proceed?", "requestedSchema": {"type": "object", "properties": {}}},
    }
    try:
        answer = await ctx.ask("confirm", request)
    except QuestionDeclined as declined:
        answer = declined.answer
    return f"answered {answer.get('action')}"
