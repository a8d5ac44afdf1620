"""TaskStatusNotifier: the SDK's own ``notifications/tasks/status`` for tasks worked elsewhere.

The SDK (``mcp`` 1.x) sends that notification only from a task's
``ServerTaskContext`` (``update_status``, ``complete``, ``fail``, which
``run_task`` calls when the work returns): ``_send_notification`` builds
``ServerNotification(TaskStatusNotification(params=...))`` from the task and
calls ``session.send_notification(...)`` on the session that ran the tool,
with no related request, so Streamable HTTP writes it to the session's
standalone GET stream (stdio: to stdout). A task that a worker of the fleet
runs, or that another MCP server replica or a gRPC client cancels or
finishes, changes in the store without that call.

``TaskStatusNotifier`` makes the same call for such changes: it watches each
followed task with ``WatchTask`` (which reports changes made through any
replica) and sends the full task on each change until it is terminal.
"""

from __future__ import annotations

import logging
import weakref
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import anyio
from anyio.abc import TaskGroup
from mcp.server.session import ServerSession
from mcp.types import ServerNotification, Task, TaskStatusNotification, TaskStatusNotificationParams

from mcp_taskstore.errors import (
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TaskStoreError,
    UnavailableError,
)
from mcp_taskstore.mcp_convert import to_mcp_task
from mcp_taskstore.store import GrpcTaskStore

logger = logging.getLogger(__name__)

_TERMINAL = ("completed", "failed", "cancelled")
# Errors after which a watch is started again: a replica shutting down, or
# the tenant's waiting calls at their limit.
_RETRYABLE = (UnavailableError, ResourceExhaustedError)
# What sending raises once the session's streams are closed.
_SESSION_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError)


@dataclass(eq=False)
class _Watch:
    task_id: str
    session: ServerSession
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


def _state(task: Task) -> tuple[Any, ...]:
    """What a status notification tells: the same state twice is sent once."""
    return (task.status, task.statusMessage, task.lastUpdatedAt)


def _current_session() -> ServerSession:
    try:
        from mcp.server.lowlevel.server import request_ctx

        return request_ctx.get().session
    except LookupError:
        raise RuntimeError("follow() outside a request handler needs session=") from None


class TaskStatusNotifier:
    """Sends ``notifications/tasks/status`` for followed tasks, wherever they change.

    One per MCP server process, for all its sessions; run it with
    ``async with`` around the server (e.g. next to
    ``StreamableHTTPSessionManager.run()`` in the app's lifespan). Inside a
    request handler, ``follow(task)`` sends each later change of the task to
    the client of that request's session, until the task is terminal,
    deleted or expired, until the session ends, or until the notifier exits.
    """

    def __init__(
        self,
        store: GrpcTaskStore,
        *,
        max_tasks: int = 1000,
        retry_initial: float = 0.25,
        retry_max: float = 5.0,
    ) -> None:
        self.store = store
        self.max_tasks = max_tasks
        self.retry_initial = retry_initial
        self.retry_max = retry_max
        self._watches: dict[tuple[str, int], _Watch] = {}
        self._hooked: weakref.WeakSet[ServerSession] = weakref.WeakSet()
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> TaskStatusNotifier:
        if self._tg is not None:
            raise RuntimeError("TaskStatusNotifier is running already")
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        tg, self._tg = self._tg, None
        assert tg is not None
        self._watches.clear()
        tg.cancel_scope.cancel()
        return await tg.__aexit__(exc_type, exc, tb)

    @property
    def following(self) -> int:
        """How many (task, session) pairs are followed now."""
        return len(self._watches)

    def follow(self, task: Task | str, session: ServerSession | None = None) -> bool:
        """Follow a task for a session (default: the session of the request being handled).

        Given the task as the client has it (the one a handler returns in
        its CreateTaskResult), only later changes are sent; given an id, its
        current state is sent first. Returns False, following nothing, for a
        terminal task, when the notifier is not running, or when
        ``max_tasks`` are followed; a task followed already for the session
        stays followed (True).
        """
        session = session if session is not None else _current_session()
        task_id = task if isinstance(task, str) else task.taskId
        key = (task_id, id(session))
        if key in self._watches:
            return True
        if self._tg is None or len(self._watches) >= self.max_tasks:
            return False
        if not isinstance(task, str) and task.status in _TERMINAL:
            return False
        self._hook(session)
        watch = _Watch(task_id, session)
        self._watches[key] = watch
        self._tg.start_soon(self._run, key, watch, None if isinstance(task, str) else _state(task))
        return True

    def unfollow(self, task_id: str) -> None:
        """Stop following a task, for every session."""
        for key in [key for key in self._watches if key[0] == task_id]:
            self._watches.pop(key).scope.cancel()

    def _drop_session(self, session: ServerSession) -> None:
        for key in [key for key, watch in self._watches.items() if watch.session is session]:
            self._watches.pop(key).scope.cancel()

    def _hook(self, session: ServerSession) -> None:
        # The SDK has no public "session closed" callback. A session closes
        # its private exit stack when it ends (BaseSession.__aexit__), so a
        # callback there stops its watches at once; without one (another
        # SDK), they stop at the task's next change, when sending fails.
        if session in self._hooked:
            return
        stack = getattr(session, "_exit_stack", None)
        if stack is not None and hasattr(stack, "callback"):
            stack.callback(self._drop_session, session)
            self._hooked.add(session)

    async def _run(self, key: tuple[str, int], watch: _Watch, seen: tuple[Any, ...] | None) -> None:
        try:
            with watch.scope:
                await self._watch(watch, seen)
        except Exception:
            logger.exception("following task %s failed", watch.task_id)
        finally:
            if self._watches.get(key) is watch:
                del self._watches[key]

    async def _watch(self, watch: _Watch, seen: tuple[Any, ...] | None) -> None:
        delay = self.retry_initial
        while True:
            terminal = False
            try:
                updates = self.store.client.watch_task(watch.task_id, session_id=self.store.session_id)
                async with aclosing(updates):
                    async for info in updates:
                        delay = self.retry_initial
                        terminal = info.status.is_terminal
                        task = to_mcp_task(info)
                        # Every watch starts with the task as it is: skip it
                        # when the client has it already.
                        state = _state(task)
                        if state == seen:
                            continue
                        seen = state
                        if not await self._send(watch.session, task):
                            return
                # The service ends the stream once the task is terminal.
                if terminal:
                    return
            except (NotFoundError, InvalidArgumentError):
                return  # deleted or expired: nothing more will happen to it
            except _RETRYABLE as error:
                logger.debug("watching task %s again after %s", watch.task_id, error)
            except TaskStoreError as error:
                logger.warning("stopped following task %s: %s", watch.task_id, error)
                return
            await anyio.sleep(delay)
            delay = min(delay * 2, self.retry_max)

    async def _send(self, session: ServerSession, task: Task) -> bool:
        """Send as ``ServerTaskContext._send_notification`` does; False once the session is gone."""
        notification = TaskStatusNotification(
            params=TaskStatusNotificationParams(
                taskId=task.taskId,
                status=task.status,
                statusMessage=task.statusMessage,
                createdAt=task.createdAt,
                lastUpdatedAt=task.lastUpdatedAt,
                ttl=task.ttl,
                pollInterval=task.pollInterval,
            )
        )
        try:
            await session.send_notification(ServerNotification(notification))
        except _SESSION_GONE:
            self._drop_session(session)
            return False
        except Exception:
            logger.exception("could not send the status of task %s", task.taskId)
        return True
