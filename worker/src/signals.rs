//! Graceful shutdown on SIGTERM or SIGINT, for both binaries (`taskworker`
//! and `taskstore`, which embeds workers). A second signal exits at once:
//! a person pressing Ctrl-C twice means it.

use tokio_util::sync::CancellationToken;

/// The exit status after a second signal (128 + SIGINT, as shells do).
const EXIT_AT_ONCE: i32 = 130;

/// Cancels `shutdown` on the first SIGTERM or SIGINT; on a second one, exits
/// the process at once. If a signal cannot be listened for, the other one
/// still works.
pub async fn cancel_on_signal(shutdown: CancellationToken) {
    let mut signals = Signals::listen();
    let signal = signals.next().await;
    tracing::info!(signal, "shutdown requested (send it again to exit at once)");
    shutdown.cancel();
    let signal = signals.next().await;
    tracing::warn!(
        signal,
        "second signal: exiting at once; work in flight is recovered through its leases"
    );
    std::process::exit(EXIT_AT_ONCE);
}

struct Signals {
    terminate: Option<tokio::signal::unix::Signal>,
    interrupt: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn listen() -> Self {
        let listen = |kind: tokio::signal::unix::SignalKind, name: &str| {
            tokio::signal::unix::signal(kind)
                .map_err(|err| tracing::error!(error = %err, "cannot listen for {name}"))
                .ok()
        };
        Self {
            terminate: listen(tokio::signal::unix::SignalKind::terminate(), "SIGTERM"),
            interrupt: listen(tokio::signal::unix::SignalKind::interrupt(), "SIGINT"),
        }
    }

    /// The name of the next signal to arrive.
    async fn next(&mut self) -> &'static str {
        let terminate = async {
            match self.terminate.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        let interrupt = async {
            match self.interrupt.as_mut() {
                Some(signal) => signal.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = terminate => "SIGTERM",
            _ = interrupt => "SIGINT",
        }
    }
}
