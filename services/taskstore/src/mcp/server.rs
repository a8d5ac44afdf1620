//! Serving the gateway: `/mcp` on a listener until told to stop.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::gateway::{Gateway, GatewayParts, McpSettings};
use super::http::router;

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

    /// The routes, for serving on a listener of one's own.
    pub fn router(&self) -> axum::Router {
        router(self.gateway.clone())
    }

    /// Serves `/mcp` on `listener` until `stop` fires; waiting calls end at
    /// once then, and requests in flight are given until they answer.
    pub async fn serve(
        self,
        listener: TcpListener,
        stop: CancellationToken,
    ) -> std::io::Result<()> {
        let gateway = self.gateway.clone();
        let in_flight = self.gateway.in_flight.clone();
        let app = router(self.gateway);
        let shutdown = async move {
            stop.cancelled().await;
            gateway.shutdown.cancel();
        };
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
        // Abandoned synchronous calls cancel their tasks; before the store
        // closes.
        in_flight.settle().await;
        served
    }
}
