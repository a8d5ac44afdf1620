//! Why a claim or a fenced report is refused, and the words the
//! execution protocol writes into tasks (status messages, the error
//! result), decided once for every backend.

use std::fmt;

use crate::domain::TaskStatus;

use super::LeaseToken;

/// Why a claim was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimRefusal {
    Terminal(TaskStatus),
    NotDispatched,
    /// The job is of an older dispatch of the task.
    StaleJob,
    AlreadyClaimed,
    /// The state changed between the claim and this explanation (another
    /// claim won and already let go, say).
    NotNow,
}

impl ClaimRefusal {
    /// Whether a job of the given generation may claim the task: `None` when
    /// it may (the task is open, dispatched, of that generation and under no
    /// lease), else why not. The in-memory engine decides with this;
    /// PostgreSQL's claim statement is the same condition (`claimable!`).
    pub fn check(
        status: TaskStatus,
        dispatched: bool,
        current_generation: bool,
        claimed: bool,
    ) -> Option<Self> {
        if status.is_terminal() {
            Some(ClaimRefusal::Terminal(status))
        } else if !dispatched {
            Some(ClaimRefusal::NotDispatched)
        } else if !current_generation {
            Some(ClaimRefusal::StaleJob)
        } else if claimed {
            Some(ClaimRefusal::AlreadyClaimed)
        } else {
            None
        }
    }

    /// Why a claim that did not apply was refused, from the task as it is
    /// now: a task that looks claimable again raced another change.
    pub fn explain(
        status: TaskStatus,
        dispatched: bool,
        current_generation: bool,
        claimed: bool,
    ) -> Self {
        Self::check(status, dispatched, current_generation, claimed).unwrap_or(ClaimRefusal::NotNow)
    }
}

impl fmt::Display for ClaimRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClaimRefusal::Terminal(status) => write!(f, "task is already {status}"),
            ClaimRefusal::NotDispatched => f.write_str("task is not dispatched to workers"),
            ClaimRefusal::StaleJob => f.write_str("stale job: the task was dispatched again since"),
            ClaimRefusal::AlreadyClaimed => {
                f.write_str("task is already claimed by another worker")
            }
            ClaimRefusal::NotNow => f.write_str("task cannot be claimed now"),
        }
    }
}

/// Why a report (progress, result, release) was refused by its fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceRefusal {
    /// Terminal statuses are final, whoever reports.
    Terminal(TaskStatus),
    /// The lease is not the task's current one.
    LeaseLost,
    /// A report without a lease on a task that workers run or its caller
    /// holds: only the attempt holding the lease reports on it.
    LeaseRequired,
}

impl FenceRefusal {
    /// Why a report under a lease that did not apply was refused, from the
    /// task's status now (terminal is final, so the answer cannot go stale).
    pub fn explain(status: TaskStatus) -> Self {
        if status.is_terminal() {
            FenceRefusal::Terminal(status)
        } else {
            FenceRefusal::LeaseLost
        }
    }

    /// The same, for a report under `fence`.
    pub fn explain_for(status: TaskStatus, fence: &Fence<'_>) -> Self {
        match fence {
            Fence::Lease(_) => Self::explain(status),
            _ if status.is_terminal() => FenceRefusal::Terminal(status),
            Fence::Unheld | Fence::Overrides => FenceRefusal::LeaseRequired,
        }
    }
}

/// What a change of an open task requires of whoever runs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fence<'a> {
    /// A report of the attempt holding this lease: applies only while it
    /// is the task's current lease.
    Lease(&'a LeaseToken),
    /// A report without a lease, from a caller running its task itself:
    /// applies only to a task that no worker runs and nobody holds (never
    /// dispatched nor held: a dispatched task is the fleet's even between
    /// attempts, a held one its holder's).
    Unheld,
    /// A cancellation: applies whoever runs the task.
    Overrides,
}

impl<'a> Fence<'a> {
    /// The fence of a report that carries `lease`, or none.
    pub fn of_report(lease: Option<&'a LeaseToken>) -> Self {
        lease.map_or(Fence::Unheld, Fence::Lease)
    }

    /// Whether the change applies to an open task that workers run or a
    /// caller holds (`run_elsewhere`) under `current` (its lease now).
    pub fn admits(&self, run_elsewhere: bool, current: Option<&LeaseToken>) -> bool {
        match self {
            Fence::Lease(lease) => current == Some(*lease),
            Fence::Unheld => !run_elsewhere,
            Fence::Overrides => true,
        }
    }

    /// The lease a statement compares, if any.
    pub fn lease(&self) -> Option<&'a LeaseToken> {
        match self {
            Fence::Lease(lease) => Some(lease),
            Fence::Unheld | Fence::Overrides => None,
        }
    }
}

impl fmt::Display for FenceRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FenceRefusal::Terminal(status) => write!(f, "task is already {status}"),
            FenceRefusal::LeaseLost => f.write_str(
                "this attempt's lease is no longer current: the task was released or claimed again",
            ),
            FenceRefusal::LeaseRequired => f.write_str(
                "the task is run by a worker or held by its caller: only the attempt holding its lease reports on it (pass lease_token)",
            ),
        }
    }
}

/// The words of a claimed task's status message, with `%s` for the worker,
/// the attempt and the number of attempts: PostgreSQL fills it with its
/// `format()` in the claim statement, where the attempt number is known.
pub const RUNNING_MESSAGE_FORMAT: &str = "running on %s (attempt %s of %s)";

/// The status message of a claimed task.
pub fn running_message(worker: &str, attempt: u32, max_attempts: u32) -> String {
    let values = [
        worker.to_owned(),
        attempt.to_string(),
        max_attempts.to_string(),
    ];
    let mut parts = RUNNING_MESSAGE_FORMAT.split("%s");
    let mut message = parts.next().unwrap_or_default().to_owned();
    for (value, part) in values.iter().zip(parts) {
        message.push_str(value);
        message.push_str(part);
    }
    message
}

/// The status message of a task whose job no worker takes yet.
pub fn waiting_for_worker_message(tool: &str) -> String {
    format!("waiting for a worker that serves tool {tool}")
}

/// The `CallToolResult` of a task that failed outside its tool's control.
pub fn error_result(message: &str) -> String {
    taskstore_proto::protocol::error_result(message).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_running_message_fills_its_format() {
        assert_eq!(
            running_message("w-1", 2, 3),
            "running on w-1 (attempt 2 of 3)"
        );
        // A worker id is a value, never read as a format.
        assert_eq!(
            running_message("w %s", 1, 1),
            "running on w %s (attempt 1 of 1)"
        );
    }

    #[test]
    fn a_report_applies_only_under_its_fence() {
        let ours = LeaseToken::parse("ls_ours").expect("token");
        let theirs = LeaseToken::parse("ls_theirs").expect("token");
        // (fence, run elsewhere, current lease, applies)
        let table = [
            (Fence::Lease(&ours), true, Some(&ours), true),
            (Fence::Lease(&ours), true, Some(&theirs), false),
            (Fence::Lease(&ours), true, None, false),
            (Fence::Lease(&ours), false, None, false),
            (Fence::Unheld, false, None, true),
            (Fence::Unheld, true, None, false),
            (Fence::Unheld, true, Some(&theirs), false),
            (Fence::Overrides, true, Some(&theirs), true),
            (Fence::Overrides, false, None, true),
        ];
        for (fence, elsewhere, current, applies) in table {
            assert_eq!(
                fence.admits(elsewhere, current),
                applies,
                "{fence:?} elsewhere={elsewhere} current={current:?}"
            );
        }
        use TaskStatus::*;
        assert_eq!(
            FenceRefusal::explain_for(Completed, &Fence::Unheld),
            FenceRefusal::Terminal(Completed)
        );
        assert_eq!(
            FenceRefusal::explain_for(Working, &Fence::Lease(&ours)),
            FenceRefusal::LeaseLost
        );
        assert_eq!(
            FenceRefusal::explain_for(InputRequired, &Fence::Unheld),
            FenceRefusal::LeaseRequired
        );
    }

    #[test]
    fn a_claim_is_refused_for_exactly_the_unclaimable() {
        use TaskStatus::*;
        assert_eq!(ClaimRefusal::check(Working, true, true, false), None);
        assert_eq!(ClaimRefusal::check(InputRequired, true, true, false), None);
        assert_eq!(
            ClaimRefusal::check(Completed, true, true, false),
            Some(ClaimRefusal::Terminal(Completed))
        );
        assert_eq!(
            ClaimRefusal::check(Working, false, true, false),
            Some(ClaimRefusal::NotDispatched)
        );
        assert_eq!(
            ClaimRefusal::check(Working, true, false, false),
            Some(ClaimRefusal::StaleJob)
        );
        assert_eq!(
            ClaimRefusal::check(Working, true, true, true),
            Some(ClaimRefusal::AlreadyClaimed)
        );
        // A claim the database refused though the row looks claimable
        // raced another change.
        assert_eq!(
            ClaimRefusal::explain(Working, true, true, false),
            ClaimRefusal::NotNow
        );
    }
}
