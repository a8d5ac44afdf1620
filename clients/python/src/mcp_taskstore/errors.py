"""Errors of the typed client, one class per gRPC status the service documents.

Callers branch on the class (``except NotFoundError``) instead of inspecting
``grpc.StatusCode``; the original status stays reachable as ``.code``.
"""

from __future__ import annotations

import grpc


class TaskStoreError(Exception):
    """A call to the taskstore service failed."""

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        reason: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        # The service's machine-readable reason (google.rpc.ErrorInfo), e.g.
        # FENCE_LEASE_LOST, QUESTION_KEY_REUSED, HOLD_DISPATCHED; None without one.
        self.reason = reason
        # The ErrorInfo's metadata, e.g. {"status": "cancelled"} with FENCE_TERMINAL.
        self.metadata = metadata or {}


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
    reason, metadata = _error_info(error)
    return cls(code, error.details() or "", reason, metadata)


def _error_info(error: grpc.aio.AioRpcError) -> tuple[str | None, dict[str, str]]:
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin" and isinstance(value, bytes):
            return error_info(value)
    return None, {}


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The top-level fields of a protobuf message: (number, varint or bytes)."""
    fields: list[tuple[int, int | bytes]] = []
    pos = 0

    def varint() -> int:
        nonlocal pos
        shift = result = 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                return result
            shift += 7

    while pos < len(data):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            fields.append((number, varint()))
        elif wire == 2:
            size = varint()
            fields.append((number, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError("unsupported wire type")
    return fields


def error_info_reason(status_bin: bytes) -> str | None:
    """``reason`` of the ``google.rpc.ErrorInfo`` in a serialized ``google.rpc.Status``."""
    return error_info(status_bin)[0]


def error_info(status_bin: bytes) -> tuple[str | None, dict[str, str]]:
    """``reason`` and ``metadata`` of the ``google.rpc.ErrorInfo`` in a
    serialized ``google.rpc.Status``: (None, {}) without one.

    Read by hand (Status.details = 3, Any.type_url = 1, Any.value = 2,
    ErrorInfo.reason = 1, ErrorInfo.metadata = 3, a map entry's key = 1 and
    value = 2) so the package needs no googleapis protos.
    """
    try:
        for number, detail in _fields(status_bin):
            if number != 3 or not isinstance(detail, bytes):
                continue
            parts = dict(_fields(detail))
            type_url, value = parts.get(1), parts.get(2)
            if isinstance(type_url, bytes) and type_url.endswith(b"google.rpc.ErrorInfo") and isinstance(value, bytes):
                return _reason_and_metadata(value)
    except (IndexError, ValueError):
        return None, {}
    return None, {}


def _reason_and_metadata(info: bytes) -> tuple[str | None, dict[str, str]]:
    reason: str | None = None
    metadata: dict[str, str] = {}
    for number, field in _fields(info):
        if not isinstance(field, bytes):
            continue
        if number == 1:
            reason = field.decode(errors="replace")
        elif number == 3:
            entry = dict(_fields(field))
            key, value = entry.get(1, b""), entry.get(2, b"")
            if isinstance(key, bytes) and isinstance(value, bytes):
                metadata[key.decode(errors="replace")] = value.decode(errors="replace")
    return reason, metadata
