//! What steers one running attempt: the token its tool watches, why it was
//! stopped (decided once), and the news that its task changed (for a tool
//! waiting for an answer). Shared by the attempt's guards, its tool's
//! context and the attempt itself.

use std::sync::OnceLock;
use std::time::Duration;

use taskstore_proto::v1 as pb;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// Why an attempt stopped before its tool finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The task was cancelled: store nothing.
    Cancelled,
    /// The task finished without this attempt: store nothing.
    Finished,
    /// The task expired or was deleted: store nothing.
    Gone,
    /// The lease is gone: another attempt may own the task; store nothing.
    LeaseLost,
    /// The service told the worker to stop for a reason it did not name.
    Told,
    /// The worker is shutting down: give the task back.
    Shutdown,
    /// The tool waited for an answer longer than the worker keeps a slot
    /// for one: give the task back until the answer comes.
    Parked,
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use taskstore_proto::protocol::{
            STOP_CANCELLED, STOP_FINISHED, STOP_GONE, STOP_LEASE_LOST,
        };
        f.write_str(match self {
            Stop::Cancelled => STOP_CANCELLED,
            Stop::Finished => STOP_FINISHED,
            Stop::Gone => STOP_GONE,
            Stop::LeaseLost => STOP_LEASE_LOST,
            Stop::Told => pb::StopReason::Unspecified.describe(),
            Stop::Shutdown => "the worker is shutting down",
            Stop::Parked => "the tool waits for an answer without a worker",
        })
    }
}

impl From<pb::StopReason> for Stop {
    fn from(reason: pb::StopReason) -> Self {
        match reason {
            pb::StopReason::Cancelled => Stop::Cancelled,
            pb::StopReason::Finished => Stop::Finished,
            pb::StopReason::Gone => Stop::Gone,
            pb::StopReason::LeaseLost => Stop::LeaseLost,
            pb::StopReason::Unspecified => Stop::Told,
        }
    }
}

/// One attempt's controls.
#[derive(Debug)]
pub(crate) struct Control {
    /// Fires when the attempt must stop: its tool should return soon.
    pub(crate) cancel: CancellationToken,
    stop: OnceLock<Stop>,
    /// Told whenever the task changes (an answer may have come).
    pub(crate) changed: Notify,
    /// How long a question may wait before the attempt parks.
    pub(crate) park_after: Duration,
}

impl Control {
    pub(crate) fn new(park_after: Duration) -> Self {
        Self {
            cancel: CancellationToken::new(),
            stop: OnceLock::new(),
            changed: Notify::new(),
            park_after,
        }
    }

    /// Stops the attempt for `reason` (the first reason wins).
    pub(crate) fn stop(&self, reason: Stop) {
        let _ = self.stop.set(reason);
        self.cancel.cancel();
    }

    pub(crate) fn stopped(&self) -> Option<Stop> {
        self.stop.get().copied()
    }
}
