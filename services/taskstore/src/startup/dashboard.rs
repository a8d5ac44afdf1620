//! The web dashboard of a service: bound at build time (its address known,
//! port 0 resolved, before anything runs), served beside the gRPC and MCP
//! ports over the same stores, credentials and admission limits.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Backends, StartupError};
use crate::auth::Authenticator;
use crate::dashboard::{Dashboard, DashboardParts, DashboardSettings};
use crate::edge::Admissions;
use crate::settings::ServiceSettings;

/// A dashboard and the listener it will serve on.
#[derive(Debug)]
pub(super) struct BoundDashboard {
    listener: TcpListener,
    addr: SocketAddr,
    dashboard: Dashboard,
}

pub(super) async fn bind(
    dashboard: &DashboardSettings,
    settings: &ServiceSettings,
    backends: &Backends,
    authenticator: Authenticator,
    admissions: Arc<Admissions>,
) -> Result<BoundDashboard, StartupError> {
    let bind_error = |source| StartupError::Bind {
        port: super::Listener::Dashboard,
        address: dashboard.listen.clone(),
        source,
    };
    let listener = TcpListener::bind(&dashboard.listen)
        .await
        .map_err(bind_error)?;
    let addr = listener.local_addr().map_err(bind_error)?;
    let built = Dashboard::new(
        DashboardParts {
            store: backends.store.clone(),
            insights: backends.insights.clone(),
            operations: backends.operations.clone(),
            authenticator,
            admissions,
            limits: settings.limits,
            keys: backends.keys.clone(),
        },
        dashboard.clone(),
    )
    .map_err(StartupError::Config)?;
    Ok(BoundDashboard {
        listener,
        addr,
        dashboard: built,
    })
}

impl BoundDashboard {
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `stop` fires.
    pub(super) fn spawn(self, stop: CancellationToken) -> JoinHandle<std::io::Result<()>> {
        tokio::spawn(self.dashboard.serve(self.listener, stop))
    }
}
