"""Tools a worker serves: declared as FastMCP declares them (name, title,
description, an input schema from the type hints and pydantic), plus
``task_support``, an optional ``RetryPolicy``, ``ConcurrencyLimit`` and
``RateLimit``; run with their arguments
validated, as FastMCP runs them.

A tool is an ``async def`` (or a plain ``def``, run in a thread so the
worker's leases keep being renewed). A parameter annotated ``ToolContext``
gets the attempt's context (progress, questions, cancellation); one
annotated with FastMCP's ``Context`` gets a stand-in with the same methods
(see ``fastmcp_context``). What it returns becomes the ``CallToolResult``
exactly as FastMCP converts it; return a ``CallToolResult`` with
``isError=True`` (or raise) to fail, raise ``RetryableError`` to be retried.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mcp.server.fastmcp.exceptions import ToolError as FastMCPToolError
from mcp.server.fastmcp.tools import Tool as FastMCPTool
from mcp.types import CallToolResult
from pydantic import ValidationError

from mcp_taskstore._proto import execution_pb2 as xpb
from mcp_taskstore.worker.failures import BackOff, InvalidArguments, RetryableError, ToolFailure
from mcp_taskstore.worker.limits import ConcurrencyLimit, RateLimit, check_fairness_key


TaskSupport = Literal["optional", "required", "forbidden"]
_TASK_SUPPORT = {
    "optional": xpb.TASK_SUPPORT_OPTIONAL,
    "required": xpb.TASK_SUPPORT_REQUIRED,
    "forbidden": xpb.TASK_SUPPORT_FORBIDDEN,
}


@dataclass(frozen=True)
class RetryPolicy:
    """A tool's retry policy, sent to the service with its description.

    What is left out is the service's; a task keeps the policy its tool had
    when it was created. Durations are in seconds.
    """

    # Attempts a task gets when its caller asks for no number (1 to 100; 1: never retried).
    max_attempts: int | None = None
    # The first retry's backoff ceiling (10 ms to 24 h); doubles per attempt, with jitter.
    backoff_base: float | None = None
    # The longest backoff (10 ms to 24 h).
    backoff_max: float | None = None
    # False: a ``RetryableError`` fails the task at once.
    retry_errors: bool = True
    # False: a task whose worker was lost mid-attempt (killed, frozen, cut off)
    # fails rather than running again, for tools whose half-done work must not
    # be repeated.
    retry_lost_workers: bool = True

    def message(self) -> xpb.RetryPolicy:
        policy = xpb.RetryPolicy(retry_errors=self.retry_errors, retry_lost_workers=self.retry_lost_workers)
        if self.max_attempts is not None:
            policy.max_attempts = self.max_attempts
        if self.backoff_base is not None:
            policy.backoff_base.FromMilliseconds(round(self.backoff_base * 1000))
        if self.backoff_max is not None:
            policy.backoff_max.FromMilliseconds(round(self.backoff_max * 1000))
        return policy


def error_result(text: str) -> dict[str, Any]:
    """The ``CallToolResult`` of a failure: one text item, ``isError: true``."""
    return {"content": [{"type": "text", "text": text}], "isError": True}


def text_result(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _context_parameter(fn: Callable[..., Any]) -> tuple[str | None, bool]:
    """The parameter that takes the context, and whether it wants FastMCP's ``Context``."""
    from mcp.server.fastmcp import Context

    from mcp_taskstore.worker.context import ToolContext

    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        return None, False
    for name, annotation in hints.items():
        candidates = [annotation, *typing.get_args(annotation)]
        for candidate in candidates:
            if inspect.isclass(candidate) and issubclass(candidate, ToolContext):
                return name, False
            if inspect.isclass(candidate) and issubclass(candidate, Context):
                return name, True
    return None, False


@dataclass
class FleetTool:
    """A tool as a worker serves it."""

    tool: FastMCPTool
    task_support: TaskSupport = "optional"
    # The context parameter wants FastMCP's Context (a stand-in is passed).
    fastmcp_context: bool = False
    # How its tasks are retried; None: the service's policy.
    retry: RetryPolicy | None = None
    # At most how many of its tasks run at once per key; None: no limit.
    concurrency: ConcurrencyLimit | None = None
    # At most how many of its tasks start per window per key; None: no limit.
    rate: RateLimit | None = None
    # Within a tenant, the key whose values take turns when its tasks wait
    # for room ("arguments.customer_id"); None: first in, first out.
    fairness_key: str | None = None

    @property
    def name(self) -> str:
        return self.tool.name

    def description(self) -> xpb.ToolDescription:
        """What the heartbeat tells the service (for ``tools/list`` and ``taskstore status``)."""
        return xpb.ToolDescription(
            name=self.tool.name,
            title=self.tool.title or "",
            description=self.tool.description or "",
            input_schema_json=json.dumps(self.tool.parameters, separators=(",", ":")),
            task_support=_TASK_SUPPORT[self.task_support],
            retry=self.retry.message() if self.retry is not None else None,
            concurrency=self.concurrency.message() if self.concurrency is not None else None,
            rate=self.rate.message() if self.rate is not None else None,
            fairness_key=self.fairness_key or "",
        )

    async def run(self, context: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        """Runs one call; returns the ``CallToolResult`` as JSON.

        Raises ``RetryableError``, ``ToolFailure`` (invalid arguments, or
        any exception of the tool), or ``asyncio.CancelledError``.
        """
        tool = self.tool
        fn = tool.fn if tool.is_async else _in_thread(tool.fn)
        direct = None
        if tool.context_kwarg is not None:
            if self.fastmcp_context:
                from mcp_taskstore.worker.fastmcp_context import FleetFastMCPContext

                context = FleetFastMCPContext(context)
            direct = {tool.context_kwarg: context}
        try:
            value = await tool.fn_metadata.call_fn_with_arg_validation(fn, True, arguments, direct)
        except ValidationError as error:
            raise InvalidArguments(f"invalid arguments for {tool.name}: {error}") from error
        except (RetryableError, ToolFailure, BackOff):
            raise
        except FastMCPToolError as error:
            raise ToolFailure(str(error)) from error
        except Exception as error:
            raise ToolFailure(f"{type(error).__name__}: {error}" if not str(error) else str(error)) from error
        return result_json(tool.fn_metadata.convert_result(value))


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    async def call(**kwargs: Any) -> Any:
        return await asyncio.to_thread(fn, **kwargs)

    return call


def result_json(converted: Any) -> dict[str, Any]:
    """FastMCP's converted result (``convert_result``) as ``CallToolResult`` JSON."""
    if isinstance(converted, CallToolResult):
        return converted.model_dump(mode="json", by_alias=True, exclude_none=True)
    structured = None
    if isinstance(converted, tuple):
        converted, structured = converted
    content = [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in converted]
    result: dict[str, Any] = {"content": content, "isError": False}
    if structured is not None:
        result["structuredContent"] = structured
    return result


def make_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    task_support: TaskSupport = "optional",
    structured_output: bool | None = None,
    retry: RetryPolicy | None = None,
    concurrency: ConcurrencyLimit | None = None,
    rate: RateLimit | None = None,
    fairness_key: str | None = None,
) -> FleetTool:
    """A tool from a function, as FastMCP's ``Tool.from_function`` makes one
    (``structured_output`` as FastMCP's: None decides from the return annotation)."""
    if task_support not in _TASK_SUPPORT:
        raise ValueError(f"task_support must be one of {sorted(_TASK_SUPPORT)}, got {task_support!r}")
    if concurrency is not None and not isinstance(concurrency, ConcurrencyLimit):
        raise TypeError(f"concurrency must be a ConcurrencyLimit, got {concurrency!r}")
    if rate is not None and not isinstance(rate, RateLimit):
        raise TypeError(f"rate must be a RateLimit, got {rate!r}")
    if fairness_key is not None:
        check_fairness_key(fairness_key)
    context_kwarg, fastmcp = _context_parameter(fn)
    tool = FastMCPTool.from_function(
        fn,
        name=name,
        title=title,
        description=description,
        context_kwarg=context_kwarg,
        structured_output=structured_output,
    )
    return FleetTool(tool, task_support, fastmcp, retry, concurrency, rate, fairness_key)


class Tools:
    """The tools of a worker (what ``mcp-taskstore-worker module:tools`` loads).

    ::

        tools = Tools()

        @tools.tool(task_support="required")
        async def resize(path: str, width: int, ctx: ToolContext) -> str:
            await ctx.progress("resizing")
            return "done"
    """

    def __init__(self, tools: Iterable[FleetTool] = ()) -> None:
        self._tools: dict[str, FleetTool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: FleetTool) -> FleetTool:
        if tool.name in self._tools:
            raise ValueError(f"tool {tool.name!r} is declared twice")
        self._tools[tool.name] = tool
        return tool

    def tool(
        self,
        name: str | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        task_support: TaskSupport = "optional",
        structured_output: bool | None = None,
        retry: RetryPolicy | None = None,
        concurrency: ConcurrencyLimit | None = None,
        rate: RateLimit | None = None,
        fairness_key: str | None = None,
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator: serve the function as a tool (it stays callable as it was)."""
        if callable(name):
            raise TypeError("use @tools.tool() with parentheses")

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            tool = make_tool(
                fn,
                name=name,
                title=title,
                description=description,
                task_support=task_support,
                structured_output=structured_output,
                retry=retry,
                concurrency=concurrency,
                rate=rate,
                fairness_key=fairness_key,
            )
            self.add(tool)
            return fn

        return register

    def __iter__(self) -> Iterator[FleetTool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def __getitem__(self, name: str) -> FleetTool:
        return self._tools[name]

    def names(self) -> list[str]:
        return sorted(self._tools)


def from_fastmcp(server: Any, names: Sequence[str] | None = None, task_support: TaskSupport = "optional") -> Tools:
    """The tools registered on a FastMCP server (``@mcp.tool()``), as a worker serves them.

    Their functions, schemas and descriptions are FastMCP's own; a tool's
    ``Context`` parameter gets a stand-in (progress, logging, elicitation
    through the task's questions).
    """
    tools = Tools()
    for tool in server._tool_manager.list_tools():
        if names is not None and tool.name not in names:
            continue
        _, fastmcp = _context_parameter(tool.fn)
        tools.add(FleetTool(tool, task_support, fastmcp or tool.context_kwarg is not None))
    return tools


def load_tools(target: Any) -> Tools:
    """``Tools``, a FastMCP server, or an iterable of functions/``FleetTool``s, as ``Tools``."""
    if isinstance(target, Tools):
        return target
    if hasattr(target, "_tool_manager"):
        return from_fastmcp(target)
    if isinstance(target, FleetTool):
        return Tools([target])
    if callable(target):
        return Tools([make_tool(target)])
    if isinstance(target, Iterable):
        return Tools(item if isinstance(item, FleetTool) else make_tool(item) for item in target)
    raise TypeError(f"not tools: {target!r} (give a Tools, a FastMCP server, or functions)")
