//! Serving the gateway: `/mcp` on a listener until told to stop, through
//! the accept loop every outside-facing HTTP port shares
//! ([`crate::edge::serve_until_stopped`]: header deadline, connection cap,
//! graceful stop); at a stop, waiting calls end at once.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::gateway::{Gateway, GatewayParts, McpSettings};
use super::http::router;
use crate::edge::{ConnectionLimits, serve_until_stopped};

/// The MCP gateway, built and ready to serve.
#[derive(Debug, Clone)]
pub struct McpGateway {
    gateway: Arc<Gateway>,
}

impl McpGateway {
    pub fn new(parts: GatewayParts, settings: McpSettings) -> Self {
        Self {
            gateway: Arc::new(Gateway::new(parts, settings, CancellationToken::new())),
        }
    }

    /// Serves `/mcp` on `listener` until `stop` fires; then waiting calls end
    /// at once, requests in flight are given until they answer, and the
    /// cancellations of abandoned calls are awaited.
    pub async fn serve(
        self,
        listener: TcpListener,
        stop: CancellationToken,
    ) -> std::io::Result<()> {
        let settings = &self.gateway.settings;
        let limits = ConnectionLimits {
            header_read_timeout: settings.header_read_timeout,
            idle_timeout: settings.idle_timeout,
            max_connections: settings.max_connections,
        };
        let app = router(self.gateway.clone());
        let shutdown = self.gateway.shutdown.clone();
        serve_until_stopped("mcp", listener, app, limits, stop, move || {
            shutdown.cancel()
        })
        .await;
        // Abandoned synchronous calls cancel their tasks; before the store
        // closes.
        self.gateway.in_flight.settle().await;
        Ok(())
    }
}
