"""Tools for the worker tests beyond the conformance ones (run by
``mcp-taskstore-worker fleet_tools:tools`` with tests/ on PYTHONPATH)."""

from __future__ import annotations

import asyncio

from mcp_taskstore.worker import ToolContext, Tools

tools = Tools()


@tools.tool(description="Ignores its cancellation (a tool the worker must abandon).")
async def stubborn(ctx: ToolContext) -> str:
    await ctx.progress("ignoring cancellations")
    for _ in range(600):
        try:
            await asyncio.sleep(0.1)
        except asyncio.CancelledError:
            continue  # swallowed: never do this
    return "never stopped"
