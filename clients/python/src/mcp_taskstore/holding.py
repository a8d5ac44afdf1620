"""Tasks an SDK server runs in its own process, held with a lease (``HoldTask``).

``run_task`` creates the task in the store, then starts the tool's work in
the SDK's task group. Nothing in the service knows that process: were it to
die, the task would stay ``working`` until its ttl. So the store holds every
task that ``run_task`` runs for a ``tools/call``: before the work starts, a
first ``HoldTask`` (empty token) gives it a lease of one attempt, a renewal every
third of ``lease_duration`` keeps it, and progress and the result carry the
token. A renewal that says ``keep_running: false`` (the task was cancelled,
ended elsewhere, or its lease lapsed) cancels the work. If the process dies,
nobody renews: the service's reaper fails the task within lease + reaper
interval (20 s by default), saying the holder stopped.

The pieces: ``capture_tool_calls`` remembers the ``tools/call`` being handled
(the SDK's ``create_task`` gets no request, and only a tools/call task can be
held); ``Holds`` keeps the leases; ``HoldingTaskSupport`` wraps the work that
``run_task`` starts in a cancel scope that a stop reaches.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp.server.experimental.task_support import TaskSupport
from mcp.types import CallToolRequest

from mcp_taskstore.client import TaskStoreClient
from mcp_taskstore.errors import FailedPreconditionError, NotFoundError, TaskStoreError

logger = logging.getLogger(__name__)

# The tools/call request whose handler runs now (set by capture_tool_calls).
CURRENT_CALL: contextvars.ContextVar[CallToolRequest | None] = contextvars.ContextVar(
    "mcp_taskstore_current_call", default=None
)
# The task the store just created for a tools/call: the work run_task starts
# next (in the task group) holds it. A task created in a handler and worked
# elsewhere is never held.
JUST_CREATED: contextvars.ContextVar[str | None] = contextvars.ContextVar("mcp_taskstore_just_created", default=None)


def default_holder(name: str | None = None) -> str:
    """``mcp server NAME (pid P on HOST)``: who holds, in the failed task's message."""
    what = f"mcp server {name}" if name else "mcp server"
    return f"{what} (pid {os.getpid()} on {socket.gethostname()})"[:256]


def tool_call_json(request: CallToolRequest, request_id: Any) -> dict[str, Any]:
    """The tools/call as JSON-RPC, as the service records it (its tool is ``params.name``)."""
    params = request.params.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


class _CapturingHandlers(dict):  # type: ignore[type-arg]
    """The low-level server's ``request_handlers``, with its tools/call handler
    wrapped (now or when registered later) to set ``CURRENT_CALL``."""

    def __setitem__(self, key: Any, handler: Any) -> None:
        if key is CallToolRequest and not getattr(handler, "_mcp_taskstore_captures", False):
            inner = handler

            async def capturing(request: CallToolRequest) -> Any:
                token = CURRENT_CALL.set(request)
                try:
                    return await inner(request)
                finally:
                    CURRENT_CALL.reset(token)

            capturing._mcp_taskstore_captures = True  # type: ignore[attr-defined]
            handler = capturing
        super().__setitem__(key, handler)


def capture_tool_calls(server: Any) -> None:
    """Make ``server`` (an SDK low-level ``Server``) record the tools/call it handles."""
    handlers: MutableMapping[Any, Any] = server.request_handlers
    if isinstance(handlers, _CapturingHandlers):
        return
    capturing = _CapturingHandlers()
    for key, handler in handlers.items():
        capturing[key] = handler
    server.request_handlers = capturing
    # The SDK's experimental (tasks) handlers keep the dict they were given:
    # give them this one, so that what they register later is served.
    experimental = getattr(server, "_experimental_handlers", None)
    if experimental is not None and getattr(experimental, "_request_handlers", None) is handlers:
        experimental._request_handlers = capturing


class HoldStart(enum.Enum):
    """What a first hold came to (``Holds.start``)."""

    HELD = "held"
    ENDED = "ended"
    UNHELD = "unheld"


@dataclass(eq=False)
class _Hold:
    task_id: str
    token: str
    duration: float
    scope: anyio.CancelScope | None = None
    stopped: str | None = None
    renewer: asyncio.Task[None] | None = field(default=None, repr=False)


class Holds:
    """The leases of the tasks this process runs (one store's)."""

    def __init__(self, client: TaskStoreClient, session_id: str | None, holder: str) -> None:
        self.client = client
        self.session_id = session_id
        self.holder = holder
        self._holds: dict[str, _Hold] = {}

    def token(self, task_id: str) -> str | None:
        hold = self._holds.get(task_id)
        return None if hold is None else hold.token

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._holds

    async def start(self, task_id: str) -> HoldStart:
        """First hold: ``HELD`` (renewed from now on), ``ENDED`` (cancelled,
        expired or finished before its work began: there is nothing to run),
        or ``UNHELD`` (runs, but unprotected against this process dying)."""
        try:
            held = await self.client.hold_task(task_id, holder=self.holder, session_id=self.session_id)
        except NotFoundError:
            return HoldStart.ENDED
        except FailedPreconditionError as error:
            if await self._has_ended(task_id):
                return HoldStart.ENDED
            logger.warning("task %s not held (%s); it is not protected against this process dying", task_id, error)
            return HoldStart.UNHELD
        hold = _Hold(task_id, held.lease_token, held.lease_duration.total_seconds())
        self._holds[task_id] = hold
        hold.renewer = asyncio.get_running_loop().create_task(self._renew(hold), name=f"hold {task_id}")
        return HoldStart.HELD

    async def _has_ended(self, task_id: str) -> bool:
        try:
            info = await self.client.get_task(task_id, session_id=self.session_id)
        except NotFoundError:
            return True
        except TaskStoreError:
            return False
        return info.status.is_terminal

    def attach(self, task_id: str, scope: anyio.CancelScope) -> None:
        """The work of ``task_id`` runs in ``scope``: a stop cancels it."""
        hold = self._holds.get(task_id)
        if hold is None:
            return
        hold.scope = scope
        if hold.stopped is not None:
            scope.cancel()

    def stop(self, task_id: str, reason: str) -> None:
        """Stop the work (nothing more is stored) and the renewals."""
        hold = self._holds.pop(task_id, None)
        if hold is None:
            return
        logger.info("task %s stopped: %s", task_id, reason)
        hold.stopped = reason
        if hold.scope is not None:
            hold.scope.cancel()
        self._end(hold)

    def release(self, task_id: str) -> None:
        """The work is over (its outcome stored, or it ended): stop renewing."""
        hold = self._holds.pop(task_id, None)
        if hold is not None:
            self._end(hold)

    @staticmethod
    def _end(hold: _Hold) -> None:
        renewer = hold.renewer
        if renewer is not None and renewer is not _current_task():
            renewer.cancel()

    def close(self) -> None:
        for task_id in list(self._holds):
            self.release(task_id)

    async def _renew(self, hold: _Hold) -> None:
        last_renewed = time.monotonic()
        while True:
            await asyncio.sleep(max(hold.duration / 3, 0.05))
            try:
                held = await self.client.hold_task(
                    hold.task_id,
                    holder=self.holder,
                    lease_token=hold.token,
                    session_id=self.session_id,
                    timeout=max(hold.duration / 3, 1.0),
                )
            except NotFoundError:
                return self.stop(hold.task_id, "the task no longer exists (expired or deleted)")
            except TaskStoreError as error:
                logger.warning("renewing the hold of task %s failed: %s", hold.task_id, error)
                if time.monotonic() - last_renewed >= hold.duration:
                    return self.stop(hold.task_id, "the lease was lost: no renewal succeeded for a whole lease")
                continue
            if not held.keep_running:
                return self.stop(hold.task_id, held.reason or "the service said to stop")
            hold.token = held.lease_token
            hold.duration = held.lease_duration.total_seconds() or hold.duration
            last_renewed = time.monotonic()


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:
        return None


class _HoldingTaskGroup:
    """The SDK's task group, starting each held task's work in a cancel scope."""

    def __init__(self, inner: Any, holds: Holds) -> None:
        self._inner = inner
        self._holds = holds

    def start_soon(self, func: Callable[..., Awaitable[Any]], *args: Any, name: object = None) -> None:
        task_id = JUST_CREATED.get()
        if task_id is None:
            self._inner.start_soon(func, *args, name=name)
            return
        JUST_CREATED.set(None)
        holds = self._holds

        async def held() -> None:
            # Held before the work starts. A task cancelled before then (a
            # client may cancel as soon as it has the id) has nothing to run.
            if await holds.start(task_id) is HoldStart.ENDED:
                logger.info("task %s ended before its work started; not running it", task_id)
                return
            with anyio.CancelScope() as scope:
                holds.attach(task_id, scope)
                try:
                    await func(*args)
                except Exception:
                    # The SDK's wrapper stores the work's failure; when the
                    # store refuses that too (the task ended elsewhere
                    # meanwhile), raising here would end the whole task group,
                    # and with it the client's MCP session.
                    logger.warning("task %s: its outcome could not be stored", task_id, exc_info=True)
                finally:
                    holds.release(task_id)

        self._inner.start_soon(held, name=name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class HoldingTaskSupport(TaskSupport):
    """``TaskSupport`` whose task group runs held work stoppably (see the module doc)."""

    holds: Holds | None = None

    @property
    def task_group(self) -> Any:  # type: ignore[override]
        inner = super().task_group
        return inner if self.holds is None else _HoldingTaskGroup(inner, self.holds)


def make_holding(support: TaskSupport, holds: Holds) -> TaskSupport:
    """Turn the ``TaskSupport`` that ``enable_tasks`` made into a ``HoldingTaskSupport``."""
    support.__class__ = HoldingTaskSupport
    support.holds = holds  # type: ignore[attr-defined]
    return support
