//! The MCP endpoint of a service: bound at build time (so its address is
//! known, port 0 resolved, before anything runs), served beside the gRPC
//! port over the same store, credentials and admission limits.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Backends, StartupError};
use crate::auth::{AuthMethod, Authenticator};
use crate::edge::Admissions;
use crate::mcp::{GatewayParts, McpGateway, McpSettings};
use crate::settings::ServiceSettings;

/// A gateway and the listener it will serve on.
#[derive(Debug)]
pub(super) struct BoundGateway {
    listener: TcpListener,
    addr: SocketAddr,
    gateway: McpGateway,
}

pub(super) async fn bind(
    mcp: &McpSettings,
    settings: &ServiceSettings,
    backends: &Backends,
    authenticator: Authenticator,
    admissions: Arc<Admissions>,
) -> Result<BoundGateway, StartupError> {
    let bind_error = |source| StartupError::Bind {
        port: super::Listener::Mcp,
        address: mcp.listen.clone(),
        source,
    };
    let listener = TcpListener::bind(&mcp.listen).await.map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let authorization_server = settings
        .auth
        .contains(&AuthMethod::Jwt)
        .then(|| settings.jwt.as_ref().map(|jwt| jwt.issuer.clone()))
        .flatten();
    let gateway = McpGateway::new(
        GatewayParts {
            store: backends.store.clone(),
            operations: backends.operations.clone(),
            authenticator,
            limits: settings.limits,
            admissions,
            authorization_server,
        },
        mcp.clone(),
    );
    Ok(BoundGateway {
        listener,
        addr,
        gateway,
    })
}

impl BoundGateway {
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `stop` fires.
    pub(super) fn spawn(self, stop: CancellationToken) -> JoinHandle<std::io::Result<()>> {
        tokio::spawn(self.gateway.serve(self.listener, stop))
    }
}
