"""GrpcTaskStore: the MCP Python SDK's TaskStore, kept in a taskstore service."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from mcp.shared.experimental.tasks.store import TaskStore
from mcp.types import Result, Task, TaskMetadata
from mcp.types import TaskStatus as McpTaskStatus

from mcp_taskstore.channel import ClientOptions
from mcp_taskstore.client import TaskStoreClient
from mcp_taskstore.errors import (
    AlreadyExistsError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
)
from mcp_taskstore.call_meta import idempotency_key_of, with_start_of
from mcp_taskstore.holding import CURRENT_CALL, JUST_CREATED, Holds, default_holder, tool_call_json
from mcp_taskstore.mcp_convert import failure_reason, result_from_json, result_to_json, to_mcp_task
from mcp_taskstore.models import Dispatch, TaskInfo, TaskStatus, TlsConfig

# What CreateTask records as "the request that created the task" when the SDK
# gives the store none (see README, "Mismatches").
PLACEHOLDER_REQUEST_ID = "mcp-python-sdk"
PLACEHOLDER_REQUEST: Mapping[str, Any] = {}

_RESULT_STATUSES = (TaskStatus.COMPLETED, TaskStatus.FAILED)
_SEEN_LIMIT = 4096


def _current_request_id() -> int | str:
    """The JSON-RPC id of the SDK request being handled, if any.

    ``run_task`` creates its task inside the tools/call handler, where the
    low-level server's request context names the request; outside one (a
    worker, a test) there is no request and a fixed placeholder is sent.
    """
    try:
        from mcp.server.lowlevel.server import request_ctx

        return request_ctx.get().request_id
    except (ImportError, LookupError):
        return PLACEHOLDER_REQUEST_ID


def _not_found(task_id: str) -> ValueError:
    return ValueError(f"Task with ID {task_id} not found")


class GrpcTaskStore(TaskStore):
    """A ``TaskStore`` whose tasks live in mcp-taskstore (PostgreSQL or SQLite).

    Every store instance works in one scope: with ``session_id`` it sees and
    creates only that session's tasks; without, every task of its tenant.
    The SDK's TaskStore methods carry no session, hence the per-instance scope.
    """

    def __init__(
        self,
        endpoint: str | ClientOptions | TaskStoreClient,
        *,
        token: str | None = None,
        tls: TlsConfig | None = None,
        deadline: float | None = 30.0,
        session_id: str | None = None,
        page_size: int | None = None,
        poll_interval: timedelta | None = None,
        tenant: str | None = None,
        holder: str | None = None,
    ) -> None:
        if isinstance(endpoint, TaskStoreClient):
            self.client = endpoint
        elif isinstance(endpoint, ClientOptions):
            self.client = TaskStoreClient(endpoint)
        else:
            self.client = TaskStoreClient(endpoint, token=token, tls=tls, deadline=deadline, tenant=tenant)
        self.session_id = session_id
        self.page_size = page_size
        self.poll_interval = poll_interval
        # last_updated_at of tasks this store returned lately, so that
        # wait_for_update notices a change that landed between the caller's
        # get_task and the start of the watch.
        self._seen: OrderedDict[str, datetime] = OrderedDict()
        # Tasks this process runs itself (run_task), held with a lease so that
        # they fail, rather than stay working, if the process dies. Turned on
        # by enable_durable_tasks, which also stops held work when told to.
        self.hold_tasks = False
        self.holds = Holds(self.client, session_id, holder or default_holder())

    async def close(self) -> None:
        self.holds.close()
        await self.client.close()

    def _remember(self, info: TaskInfo) -> Task:
        self._seen[info.task_id] = info.last_updated_at
        self._seen.move_to_end(info.task_id)
        while len(self._seen) > _SEEN_LIMIT:
            self._seen.popitem(last=False)
        return to_mcp_task(info)

    # -- creation -------------------------------------------------------------

    async def create_task(self, metadata: TaskMetadata, task_id: str | None = None) -> Task:
        call = CURRENT_CALL.get() if self.hold_tasks else None
        if call is None:
            return await self._create(metadata, task_id, request=PLACEHOLDER_REQUEST, dispatch=None)
        # Inside a tools/call handler: record the call (only a tools/call task
        # can be held); if run_task runs it here, its work holds it (holding.py).
        task = await self._create(metadata, task_id, request=tool_call_json(call, _current_request_id()), dispatch=None)
        JUST_CREATED.set(task.taskId)
        return task

    async def create_dispatched_task(
        self,
        metadata: TaskMetadata,
        request: Mapping[str, Any],
        *,
        tool: str | None = None,
        max_attempts: int | None = None,
        task_id: str | None = None,
    ) -> Task:
        """Create a task that a worker of the fleet runs.

        ``request`` is the JSON-RPC request the worker executes, normally the
        ``tools/call`` as the client sent it. Not part of the SDK's interface.
        """
        dispatch = with_start_of(Dispatch(tool, max_attempts), request)
        return await self._create(metadata, task_id, request=request, dispatch=dispatch)

    async def _create(
        self, metadata: TaskMetadata, task_id: str | None, *, request: Mapping[str, Any], dispatch: Dispatch | None
    ) -> Task:
        request_id = request.get("id", _current_request_id())
        try:
            info = await self.client.create_task(
                request_json=request,
                request_id=request_id,
                task_id=task_id,
                session_id=self.session_id,
                # MCP's ttl None means "keep until deleted".
                ttl=None if metadata.ttl is None else timedelta(milliseconds=metadata.ttl),
                no_expiry=metadata.ttl is None,
                poll_interval=self.poll_interval,
                dispatch=dispatch,
                idempotency_key=idempotency_key_of(request),
            )
        except AlreadyExistsError:
            raise ValueError(f"Task with ID {task_id} already exists") from None
        except InvalidArgumentError as error:
            raise ValueError(f"Task rejected: {error.details}") from None
        return self._remember(info)

    # -- reads ----------------------------------------------------------------

    async def get_task(self, task_id: str) -> Task | None:
        info = await self._get_info(task_id)
        return None if info is None else self._remember(info)

    async def _get_info(self, task_id: str) -> TaskInfo | None:
        try:
            return await self.client.get_task(task_id, session_id=self.session_id)
        except (NotFoundError, InvalidArgumentError):
            # An id the service cannot accept names no task either.
            return None

    async def get_result(self, task_id: str) -> Result | None:
        try:
            stored = await self.client.get_task_result(task_id, session_id=self.session_id)
        except (NotFoundError, FailedPreconditionError, InvalidArgumentError):
            # Missing, not terminal yet, or terminal without a result.
            return None
        return result_from_json(stored.result_json)

    async def list_tasks(self, cursor: str | None = None) -> tuple[list[Task], str | None]:
        try:
            page = await self.client.list_tasks(cursor=cursor, session_id=self.session_id, page_size=self.page_size)
        except InvalidArgumentError as error:
            if cursor is not None:
                raise ValueError(f"Invalid cursor: {cursor}") from error
            raise
        return [self._remember(info) for info in page.tasks], page.next_cursor

    # -- writes ---------------------------------------------------------------

    async def update_task(
        self,
        task_id: str,
        status: McpTaskStatus | None = None,
        status_message: str | None = None,
    ) -> Task:
        # The service always sets status and message together (an unset
        # message clears it), while the SDK changes only what it names, so the
        # current task is read first to fill in the other half.
        current = await self._get_info(task_id)
        if current is None:
            raise _not_found(task_id)
        target = current.status if status is None else TaskStatus.from_mcp(status)
        message = current.status_message if status_message is None else status_message

        if current.status.is_terminal:
            return await self._settle_terminal(current, target, status_message)
        try:
            info = await self.client.update_task_status(
                task_id,
                target,
                status_message=message,
                session_id=self.session_id,
                lease_token=self.holds.token(task_id),
            )
        except NotFoundError:
            raise _not_found(task_id) from None
        except FailedPreconditionError:
            # It became terminal after we read it.
            latest = await self._get_info(task_id)
            if latest is None:
                raise _not_found(task_id) from None
            return await self._settle_terminal(latest, target, status_message)
        if info.status.is_terminal:
            self.holds.release(task_id)
        return self._remember(info)

    async def _settle_terminal(self, current: TaskInfo, target: TaskStatus, status_message: str | None) -> Task:
        """update_task on a task that is already terminal (it cannot change any more)."""
        if target == current.status and status_message in (None, current.status_message):
            return self._remember(current)
        if (
            target == current.status or (target in _RESULT_STATUSES and current.status in _RESULT_STATUSES)
        ) and await self._has_result(current.task_id):
            # The SDK's second step after store_result (TaskContext.complete
            # stores, then sets COMPLETED): the result already decided the
            # status and message, so this is acknowledged, not applied.
            return self._remember(current)
        if target == current.status:
            raise ValueError(
                f"Cannot change the status message of task {current.task_id}: "
                f"terminal status '{current.status.mcp_name}'"
            )
        raise ValueError(f"Cannot transition from terminal status '{current.status.mcp_name}'")

    async def _has_result(self, task_id: str) -> bool:
        return await self.get_result(task_id) is not None

    async def store_result(self, task_id: str, result: Result) -> None:
        # StoreTaskResult makes the task terminal together with its result;
        # an isError tool result ends the task FAILED, as the service's
        # workers do (see README, "Mismatches").
        failed = bool(getattr(result, "isError", False))
        try:
            info = await self.client.store_task_result(
                task_id,
                result_to_json(result),
                status=TaskStatus.FAILED if failed else TaskStatus.COMPLETED,
                status_message=failure_reason(result) if failed else None,
                session_id=self.session_id,
                lease_token=self.holds.token(task_id),
            )
        except (NotFoundError, InvalidArgumentError):
            self.holds.release(task_id)
            raise _not_found(task_id) from None
        except FailedPreconditionError:
            self.holds.release(task_id)
            raise ValueError(f"Task {task_id} is already terminal; it keeps its first outcome") from None
        self.holds.release(task_id)
        self._remember(info)

    async def delete_task(self, task_id: str) -> bool:
        try:
            await self.client.delete_task(task_id, session_id=self.session_id)
        except (NotFoundError, InvalidArgumentError):
            return False
        self._seen.pop(task_id, None)
        return True

    # -- waiting --------------------------------------------------------------

    async def wait_for_update(self, task_id: str) -> None:
        """Return after the task's next change, using the WatchTask stream.

        The stream's first message is the task as it is; if that is already
        newer than what this store last returned, the change happened before
        the watch began and counts. A terminal task returns at once: it will
        not change again.
        """
        seen = self._seen.get(task_id)
        first = True
        try:
            async for info in self.client.watch_task(task_id, session_id=self.session_id):
                if not first:
                    self._seen[task_id] = info.last_updated_at
                    return
                first = False
                if info.status.is_terminal or (seen is not None and info.last_updated_at > seen):
                    self._seen[task_id] = info.last_updated_at
                    return
        except (NotFoundError, InvalidArgumentError):
            if first:
                raise _not_found(task_id) from None
            # Deleted or expired while watched: that is a change too.
        # The stream ended: the task is terminal.

    async def notify_update(self, task_id: str) -> None:
        # Every change made through the service reaches all watchers (on any
        # replica) through WatchTask, so there is nothing to signal here.
        return None
