//! The accept loop of the HTTP ports that face browsers and clients from
//! outside (`/mcp`, the dashboard): a new connection must send its first
//! request's headers within a deadline (a silent or slow sender cannot hold
//! a connection for nothing), a connection with no request in flight for
//! the idle timeout is closed (an HTTP/1 keep-alive between requests, an
//! HTTP/2 connection that opened no stream: `activity.rs`), an HTTP/2 peer
//! that stops answering pings is dropped, at most so many connections are
//! served at once (more are closed at accept), and a stop lets requests in
//! flight finish. What an ingress should add per client address is in
//! docs/operations.md.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::activity::{Activity, tracked};

/// After a failed accept (out of file descriptors, say), a pause before
/// the next, so that the loop does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// How often an HTTP/2 connection is pinged, and how long its answer may
/// take before the connection is dropped (a peer gone, or one that never
/// reads).
const PING_EVERY: Duration = Duration::from_secs(20);
const PING_ANSWER_WITHIN: Duration = Duration::from_secs(10);
/// How long a connection told to close (idle, or the port stopping) may
/// take to say goodbye before it is dropped.
const CLOSE_WITHIN: Duration = Duration::from_secs(5);

/// How one port accepts connections.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// How long a connection may take to send a request's headers.
    pub header_read_timeout: Duration,
    /// How long a connection may stay open with no request in flight.
    pub idle_timeout: Duration,
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
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(PING_EVERY))
        .keep_alive_timeout(PING_ANSWER_WITHIN);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let connections = TaskTracker::new();
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
        let (builder, app, stop) = (builder.clone(), app.clone(), stop.clone());
        connections.spawn(async move {
            serve_connection(port, stream, &builder, app, limits, stop).await;
            drop(slot);
        });
    }
    drop(listener);
    on_stop();
    connections.close();
    connections.wait().await;
}

/// Serves one connection until it ends, is idle for too long, or the port
/// stops (then its requests in flight finish first).
async fn serve_connection(
    port: &'static str,
    stream: TcpStream,
    builder: &Builder<TokioExecutor>,
    app: Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    // hyper's header deadline starts with the first byte: a connection
    // that sends nothing is closed here. (peek, not readable(): readiness
    // may be reported before any byte.)
    let mut first = [0u8; 1];
    if !matches!(
        tokio::time::timeout(limits.header_read_timeout, stream.peek(&mut first)).await,
        Ok(Ok(1))
    ) {
        return;
    }
    let activity = Activity::new();
    let service = TowerToHyperService::new(tracked(app, activity.clone()));
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(connection);
    let mut closing: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(err) = ended {
                    tracing::debug!(port, error = %err, "connection ended with an error");
                }
                return;
            }
            () = stop.cancelled(), if closing.is_none() => {
                connection.as_mut().graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + CLOSE_WITHIN);
            }
            () = activity.idle_for(limits.idle_timeout), if closing.is_none() => {
                tracing::debug!(port, "closing an idle connection");
                connection.as_mut().graceful_shutdown();
                closing = Some(tokio::time::Instant::now() + CLOSE_WITHIN);
            }
            // A stop waits for the requests in flight (the port's own
            // deadline bounds them); an idle connection that does not
            // close when asked is dropped.
            () = sleep_until_some(closing), if closing.is_some() && !stop.is_cancelled() => return,
        }
    }
}

async fn sleep_until_some(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
