//! Graceful shutdown on SIGTERM or SIGINT, for both binaries (`taskworker`
//! and `taskstore`, which embeds workers).

use tokio_util::sync::CancellationToken;

/// Cancels `shutdown` on the first SIGTERM or SIGINT. If a signal cannot be
/// listened for, the other one still works.
pub async fn cancel_on_signal(shutdown: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let signal = tokio::select! {
        () = terminate => "SIGTERM",
        () = interrupt => "SIGINT",
    };
    tracing::info!(signal, "shutdown requested");
    shutdown.cancel();
}
