"""Connection options and the grpc.aio channel built from them."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import grpc

from mcp_taskstore.models import TlsConfig


@dataclass(frozen=True)
class ClientOptions:
    """How to reach and authenticate to a taskstore service.

    ``endpoint``: ``http://HOST:PORT`` (plain), ``https://HOST:PORT`` (TLS) or
    ``HOST:PORT`` (plain unless ``tls`` is given).
    ``token``: an API key or JWT, sent as ``authorization: Bearer <token>``.
    ``tenant``: the tenant to act in, sent as ``x-taskstore-tenant`` on every
    call; needed by credentials that reach every tenant (an operator's admin
    key). None (not given): the environment variable ``TASKSTORE_TENANT``
    when it is set and not empty, else no tenant. Checked here: 1 to 128
    printable ASCII characters without spaces, not ``*``.
    ``deadline``: seconds allowed for each unary call (None: no deadline).
    Blocking calls (GetTaskResult with wait, WatchTask) take their own.
    """

    endpoint: str
    token: str | None = None
    tls: TlsConfig | None = None
    deadline: float | None = 30.0
    channel_options: tuple[tuple[str, object], ...] = field(default_factory=tuple)
    tenant: str | None = None

    def __post_init__(self) -> None:
        # Frozen: the resolved tenant is written once, here.
        object.__setattr__(self, "tenant", resolve_tenant(self.tenant))

    def target_and_security(self) -> tuple[str, bool]:
        """Split the endpoint into a gRPC target and whether TLS is used."""
        endpoint = self.endpoint
        if endpoint.startswith("https://"):
            return endpoint.removeprefix("https://").rstrip("/"), True
        if endpoint.startswith("http://"):
            if self.tls is not None:
                raise ValueError("tls options given with an http:// endpoint; use https://")
            return endpoint.removeprefix("http://").rstrip("/"), False
        return endpoint.rstrip("/"), self.tls is not None

    def metadata(self) -> tuple[tuple[str, str], ...]:
        metadata: list[tuple[str, str]] = []
        if self.token is not None:
            metadata.append(("authorization", f"Bearer {self.token}"))
        if self.tenant is not None:
            metadata.append((TENANT_METADATA, self.tenant))
        return tuple(metadata)


TENANT_METADATA = "x-taskstore-tenant"
TENANT_ENV = "TASKSTORE_TENANT"
# The service's tenant id; `*` (every tenant) is for making keys, not a tenant to act in.
_TENANT_ID = re.compile(r"[\x21-\x7e]{1,128}")


def resolve_tenant(tenant: str | None) -> str | None:
    """The tenant given, else ``TASKSTORE_TENANT`` (unless empty), checked; None for none.

    Raises ``ValueError`` naming the option (or the variable) when malformed.
    """
    source = "tenant"
    if tenant is None:
        tenant = os.environ.get(TENANT_ENV) or None
        if tenant is None:
            return None
        source = f"{TENANT_ENV} (the default of tenant)"
    if not isinstance(tenant, str) or _TENANT_ID.fullmatch(tenant) is None:
        raise ValueError(f"{source} must be 1 to 128 printable ASCII characters without spaces, got {tenant!r}")
    if tenant == "*":
        raise ValueError(f"{source} must name one tenant (* means every tenant), got '*'")
    return tenant


def open_channel(options: ClientOptions) -> grpc.aio.Channel:
    """Open a channel on the running event loop (grpc.aio binds to it)."""
    target, secure = options.target_and_security()
    channel_options = list(options.channel_options)
    if not secure:
        return grpc.aio.insecure_channel(target, options=channel_options)
    tls = options.tls or TlsConfig()
    if (tls.cert is None) != (tls.key is None):
        raise ValueError("TLS client certificate and key must be given together")
    credentials = grpc.ssl_channel_credentials(
        root_certificates=tls.ca, private_key=tls.key, certificate_chain=tls.cert
    )
    return grpc.aio.secure_channel(target, credentials, options=channel_options)
