"""Connection options and the grpc.aio channel built from them."""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc

from mcp_taskstore.models import TlsConfig


@dataclass(frozen=True)
class ClientOptions:
    """How to reach and authenticate to a taskstore service.

    ``endpoint``: ``http://HOST:PORT`` (plain), ``https://HOST:PORT`` (TLS) or
    ``HOST:PORT`` (plain unless ``tls`` is given).
    ``token``: an API key or JWT, sent as ``authorization: Bearer <token>``.
    ``deadline``: seconds allowed for each unary call (None: no deadline).
    Blocking calls (GetTaskResult with wait, WatchTask) take their own.
    """

    endpoint: str
    token: str | None = None
    tls: TlsConfig | None = None
    deadline: float | None = 30.0
    channel_options: tuple[tuple[str, object], ...] = field(default_factory=tuple)

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
        if self.token is None:
            return ()
        return (("authorization", f"Bearer {self.token}"),)


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
