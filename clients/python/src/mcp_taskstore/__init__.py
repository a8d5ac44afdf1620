"""Python client of mcp-taskstore: a durable TaskStore for the MCP SDK and a typed gRPC client."""

from mcp_taskstore.channel import ClientOptions
from mcp_taskstore.client import TaskStoreClient
from mcp_taskstore.errors import (
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TaskStoreError,
    UnauthenticatedError,
    UnavailableError,
)
from mcp_taskstore.call_meta import (
    IDEMPOTENCY_META_KEY,
    START_AFTER_META_KEY,
    START_AT_META_KEY,
    idempotency_key_of,
)
from mcp_taskstore.models import (
    AnsweredInputRequests,
    Dispatch,
    InputRequest,
    ServedTool,
    TaskInfo,
    TaskPage,
    TaskResult,
    TaskStatus,
    TlsConfig,
)
from mcp_taskstore.server_handlers import enable_durable_tasks
from mcp_taskstore.status_notifier import TaskStatusNotifier
from mcp_taskstore.store import GrpcTaskStore

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "START_AFTER_META_KEY",
    "START_AT_META_KEY",
    "AlreadyExistsError",
    "AnsweredInputRequests",
    "ClientOptions",
    "DeadlineExceededError",
    "Dispatch",
    "FailedPreconditionError",
    "GrpcTaskStore",
    "InputRequest",
    "InvalidArgumentError",
    "NotFoundError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ServedTool",
    "TaskInfo",
    "TaskPage",
    "TaskResult",
    "TaskStatus",
    "TaskStatusNotifier",
    "TaskStoreClient",
    "TaskStoreError",
    "TlsConfig",
    "UnauthenticatedError",
    "UnavailableError",
    "enable_durable_tasks",
    "idempotency_key_of",
]
