"""Errors of the typed client, one class per gRPC status the service documents.

Callers branch on the class (``except NotFoundError``) instead of inspecting
``grpc.StatusCode``; the original status stays reachable as ``.code``.
"""

from __future__ import annotations

import grpc


class TaskStoreError(Exception):
    """A call to the taskstore service failed."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details


class InvalidArgumentError(TaskStoreError):
    """Malformed input: bad id, bad JSON, unknown status, tampered cursor."""


class NotFoundError(TaskStoreError):
    """No such task visible to the caller (missing, expired, other session)."""


class AlreadyExistsError(TaskStoreError):
    """A caller-supplied task id is already in use."""


class FailedPreconditionError(TaskStoreError):
    """The task's status does not allow the operation (e.g. it is terminal)."""


class ResourceExhaustedError(TaskStoreError):
    """A quota is reached or the message is too large."""


class UnavailableError(TaskStoreError):
    """The service or its database is unreachable; safe to retry."""


class UnauthenticatedError(TaskStoreError):
    """No or bad credentials (see the ``token`` and TLS options)."""


class PermissionDeniedError(TaskStoreError):
    """The credentials do not allow this call."""


class DeadlineExceededError(TaskStoreError):
    """The call's deadline passed before the service answered."""


_BY_CODE: dict[grpc.StatusCode, type[TaskStoreError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
}


def translate(error: grpc.aio.AioRpcError) -> TaskStoreError:
    """Map a gRPC failure to the matching TaskStoreError subclass."""
    code = error.code()
    cls = _BY_CODE.get(code, TaskStoreError)
    return cls(code, error.details() or "")
