"""A FastMCP server whose tools move onto the fleet with one line.

- As a worker's tools: ``mcp-taskstore-worker fastmcp_app:mcp`` (tests/ on PYTHONPATH).
- As the MCP server: ``python fastmcp_app.py --taskstore http://HOST:PORT``
  (Streamable HTTP on an ephemeral port, printed as ``PORT <n>``), answering
  its tools' calls as tasks dispatched to the fleet (``serve_on_fleet``).

``guarded_delete`` asks its caller (``ctx.elicit``) before it answers.

``slow_add`` writes ``start``/``end`` lines to the file named by
``FLEET_RUNS`` (when set), so a test sees each run of it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys

import anyio
import uvicorn
from mcp.server.fastmcp import Context, FastMCP
from pydantic import BaseModel

mcp = FastMCP("fleet-demo")


def _record(event: str, a: int, b: int) -> None:
    path = os.environ.get("FLEET_RUNS")
    if path:
        with open(path, "a") as out:
            out.write(f"{event} {a}+{b} {os.getpid()}\n")


@mcp.tool(description="Adds two numbers, slowly, reporting its progress.")
async def slow_add(a: int, b: int, ctx: Context, seconds: float = 2.0) -> int:
    _record("start", a, b)
    steps = 10
    for step in range(1, steps + 1):
        await asyncio.sleep(seconds / steps)
        await ctx.report_progress(step, steps, "adding")
    _record("end", a, b)
    return a + b


@mcp.tool()
def shout(text: str) -> str:
    """Upper-cases its text (a plain def: run in a thread on the fleet)."""
    return text.upper()


class Approval(BaseModel):
    approve: bool


@mcp.tool()
async def guarded_delete(path: str, ctx: Context) -> str:
    """Deletes nothing, but asks its caller first (an elicitation)."""
    answer = await ctx.elicit(f"Really delete {path}?", Approval)
    if answer.action == "accept" and answer.data.approve:
        return f"deleted {path}"
    return f"kept {path} ({answer.action})"


def main() -> int:
    from mcp_taskstore.fleet import serve_on_fleet

    parser = argparse.ArgumentParser()
    parser.add_argument("--taskstore", required=True)
    args = parser.parse_args()
    store = serve_on_fleet(mcp, args.taskstore)  # the one line
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(mcp.streamable_http_app(), log_level="warning"))

    async def serve() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(server.serve, [sock])
            while not server.started:
                await anyio.sleep(0.02)
            print(f"PORT {port}", flush=True)
        await store.close()

    anyio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
