"""Fleet workers in Python: tools written as FastMCP writes them, run with
the fleet's guarantees (claimed, leased, fenced, retried, cancelled within a
second, run again after a crash, given back on a graceful stop).

::

    from mcp_taskstore.worker import RetryableError, ToolContext, Tools, Worker

    tools = Tools()

    @tools.tool(title="Resize", task_support="optional")
    async def resize(path: str, width: int, ctx: ToolContext) -> str:
        await ctx.progress("resizing")
        return f"{path} resized to {width}"

Run it with ``mcp-taskstore-worker my_module:tools --endpoint ... --amqp-url ...``,
or ``await Worker(tools, endpoint=..., amqp_url=...).run()``. The protocol is
docs/execution.md's "Writing a worker in another language".
"""

from mcp_taskstore.worker.broker import AmqpTls
from mcp_taskstore.worker.context import QuestionDeclined, QuestionRefused, ToolContext
from mcp_taskstore.worker.control import Stop
from mcp_taskstore.worker.failures import BackOff
from mcp_taskstore.worker.limits import ConcurrencyLimit, RateLimit
from mcp_taskstore.worker.heartbeat import WorkerRefused
from mcp_taskstore.worker.runtime import Worker, WorkerConfig
from mcp_taskstore.worker.tools import (
    FleetTool,
    InvalidArguments,
    RetryableError,
    RetryPolicy,
    TaskSupport,
    ToolFailure,
    Tools,
    error_result,
    from_fastmcp,
    make_tool,
    text_result,
)

__all__ = [
    "AmqpTls",
    "BackOff",
    "ConcurrencyLimit",
    "FleetTool",
    "InvalidArguments",
    "QuestionDeclined",
    "QuestionRefused",
    "RateLimit",
    "RetryableError",
    "RetryPolicy",
    "Stop",
    "TaskSupport",
    "ToolContext",
    "ToolFailure",
    "Tools",
    "Worker",
    "WorkerConfig",
    "WorkerRefused",
    "error_result",
    "from_fastmcp",
    "make_tool",
    "text_result",
]
