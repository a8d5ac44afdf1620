//! Serving the gateway: `/mcp` on a listener until told to stop. The MCP
//! port faces clients from outside, so it has its own accept loop: a new
//! connection must send its first request's headers within a deadline (a
//! silent or slow sender cannot hold a connection for nothing), at most so
//! many connections are served at once (more are closed at accept), and a
//! stop lets requests in flight finish while waiting calls end at once. An
//! idle keep-alive connection between requests is bounded only by the cap:
//! put an ingress with an idle timeout in front of a public endpoint.

use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::gateway::{Gateway, GatewayParts, McpSettings};
use super::http::router;

/// After a failed accept (out of file descriptors, say), a pause before
/// the next, so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

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
        let app = router(self.gateway.clone());
        let mut builder = Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(settings.header_read_timeout);
        builder.http2().timer(TokioTimer::new());
        let slots = Arc::new(Semaphore::new(settings.max_connections));
        let graceful = GracefulShutdown::new();
        loop {
            let stream = tokio::select! {
                () = stop.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(err) => {
                        tracing::warn!(error = %err, "mcp accept failed");
                        tokio::time::sleep(ACCEPT_BACKOFF).await;
                        continue;
                    }
                },
            };
            let Ok(slot) = slots.clone().try_acquire_owned() else {
                tracing::warn!(
                    max = settings.max_connections,
                    "mcp connection refused: too many open connections"
                );
                continue;
            };
            let _ = stream.set_nodelay(true);
            let deadline = settings.header_read_timeout;
            let (builder, app, watcher) = (builder.clone(), app.clone(), graceful.watcher());
            tokio::spawn(async move {
                // hyper's header deadline starts with the first byte: a
                // connection that sends nothing is closed here.
                // (peek, not readable(): readiness may be reported before
                // any byte has arrived.)
                let mut first = [0u8; 1];
                if !matches!(
                    tokio::time::timeout(deadline, stream.peek(&mut first)).await,
                    Ok(Ok(1))
                ) {
                    return;
                }
                let service = TowerToHyperService::new(app);
                let connection = builder
                    .serve_connection_with_upgrades(TokioIo::new(stream), service)
                    .into_owned();
                if let Err(err) = watcher.watch(connection).await {
                    tracing::debug!(error = %err, "mcp connection ended with an error");
                }
                drop(slot);
            });
        }
        drop(listener);
        self.gateway.shutdown.cancel();
        graceful.shutdown().await;
        // Abandoned synchronous calls cancel their tasks; before the store
        // closes.
        self.gateway.in_flight.settle().await;
        Ok(())
    }
}
