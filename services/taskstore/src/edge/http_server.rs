//! The accept loop of the HTTP ports that face browsers and clients from
//! outside (`/mcp`, the dashboard): a new connection must send its first
//! request's headers within a deadline (a silent or slow sender cannot hold
//! a connection for nothing), at most so many connections are served at
//! once (more are closed at accept), and a stop lets requests in flight
//! finish. An idle keep-alive connection between requests is bounded only
//! by the cap: put an ingress with an idle timeout in front of a public port.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

/// After a failed accept (out of file descriptors, say), a pause before
/// the next, so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How one port accepts connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a connection may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// Connections served at once; more are closed when accepted.
    pub max_connections: usize,
}

/// Serves `app` on `listener` until `stop` fires; then `on_stop` runs (to
/// end what waits, say) and requests in flight are given until they answer.
/// `port` names the port in logs (`mcp`, `dashboard`).
pub async fn serve_until_stopped(
    port: &'static str,
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
    on_stop: impl FnOnce(),
) {
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    builder.http2().timer(TokioTimer::new());
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(err) => {
                    tracing::warn!(port, error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                    continue;
                }
            },
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(
                port,
                max = limits.max_connections,
                "connection refused: too many open connections"
            );
            continue;
        };
        let _ = stream.set_nodelay(true);
        let deadline = limits.header_read_timeout;
        let (builder, app, watcher) = (builder.clone(), app.clone(), graceful.watcher());
        tokio::spawn(async move {
            // hyper's header deadline starts with the first byte: a
            // connection that sends nothing is closed here. (peek, not
            // readable(): readiness may be reported before any byte.)
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
                tracing::debug!(port, error = %err, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    on_stop();
    graceful.shutdown().await;
}
