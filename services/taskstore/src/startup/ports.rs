//! The HTTP ports a service serves beside gRPC (`/mcp`, the dashboard):
//! stopped under the service's one shutdown deadline, and watched, so that
//! one ending on its own with an error ends the service.

use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::server::ServeError;

/// Which port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Port {
    Mcp,
    Dashboard,
}

impl Port {
    fn name(self) -> &'static str {
        match self {
            Port::Mcp => "mcp",
            Port::Dashboard => "dashboard",
        }
    }

    fn failed(self, why: String) -> ServeError {
        match self {
            Port::Mcp => ServeError::Mcp(why),
            Port::Dashboard => ServeError::Dashboard(why),
        }
    }
}

/// Waits for a port to finish its requests (told to stop already) until
/// `deadline`; then drops what is left.
pub(super) async fn stop_by(
    port: Port,
    served: Option<JoinHandle<std::io::Result<()>>>,
    deadline: Instant,
) {
    let Some(served) = served else {
        return;
    };
    let abort = served.abort_handle();
    let port = port.name();
    match tokio::time::timeout_at(deadline, served).await {
        Ok(Ok(Ok(()))) => {}
        Ok(Ok(Err(err))) => tracing::error!(port, error = %err, "the port failed"),
        Ok(Err(err)) => tracing::error!(port, error = %err, "the port panicked"),
        Err(_) => {
            tracing::warn!(
                port,
                "requests still open after the shutdown grace; dropped"
            );
            abort.abort();
        }
    }
}

/// Resolves when the port (if served) ended on its own with an error or a
/// panic, and never otherwise. The handle is taken once it ended.
pub(super) async fn ended(
    port: Port,
    served: &mut Option<JoinHandle<std::io::Result<()>>>,
) -> ServeError {
    let Some(handle) = served.as_mut() else {
        return std::future::pending().await;
    };
    let outcome = handle.await;
    *served = None;
    match outcome {
        Ok(Ok(())) => std::future::pending().await,
        Ok(Err(err)) => port.failed(err.to_string()),
        Err(err) => port.failed(format!("panicked: {err}")),
    }
}
