//! Dispatch and the execution protocol: what a worker's claim holds, the
//! policy for leases and retries, and ([`decide`]) the decisions every
//! backend takes the same way. The protocol is explained in
//! `docs/execution.md`.

mod decide;
mod effects;
mod history;
mod hold;
mod key_limits;
mod refusals;
mod retry;
mod session;

pub use decide::{AttemptEnd, AttemptState, NextStep, after_attempt};
pub use effects::{DispatchChange, Effects, LeaseChange, LeaseGrant};
pub use history::{
    AttemptHistory, AttemptOutcome, AttemptRecord, MAX_ATTEMPT_RECORDS, MAX_END_MESSAGE_CHARS,
};
pub use hold::{
    HoldOutcome, HoldRefusal, HoldState, HoldStep, Holder, MAX_HOLDER_BYTES, decide_hold, held_by,
};
pub use key_limits::{
    ConcurrencyLimit, InvalidKeyLimit, KeyExpr, KeyInputs, KeyLimit, RateLimit, TaskRate,
};
pub use refusals::{
    ClaimRefusal, Fence, FenceRefusal, RUNNING_MESSAGE_FORMAT, error_result, running_message,
    waiting_for_worker_message,
};
pub use retry::{InvalidRetryPolicy, RetryPolicy};
pub use session::{Claimant, SessionRenewal, WorkerSession, attempt_alive, claim_binds_session};

use std::fmt;
use std::time::Duration;

use super::ids::InvalidId;
use super::json::JsonObject;
use super::status::TaskStatus;

/// A tool name, as MCP allows it; it is also the job's routing key.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct ToolName(String);

impl ToolName {
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        if taskstore_proto::jobs::is_valid_tool_name(raw) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidId("must be 1 to 128 of A-Z a-z 0-9 _ - . /"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ToolName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// CreateTask's request to run the task on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRequest {
    pub tool: ToolName,
    /// `None`: its tool's, else the store's default.
    pub max_attempts: Option<u32>,
    /// Its tool's retry policy as its workers declare it (the edge reads
    /// it from the tools served now).
    pub retry: RetryPolicy,
    /// Its place in its tool's backlog: higher goes first
    /// (`domain::next_jobs`).
    pub priority: crate::domain::Priority,
    /// When it starts (`None`: at once).
    pub start: Option<super::start::StartTime>,
    /// Its tool's concurrency limit as its workers declare it (the edge
    /// reads it from the tools served now, as `retry`).
    pub concurrency: Option<ConcurrencyLimit>,
    /// Its tool's rate of starts as its workers declare it.
    pub rate: Option<RateLimit>,
    /// Its tool's fairness key as its workers declare it.
    pub fairness: Option<KeyExpr>,
}

/// The secret a claim hands its worker; reports carry it as a fence.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct LeaseToken(String);

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LeaseToken(<redacted>)")
    }
}

impl LeaseToken {
    const MAX_LEN: usize = 64;

    /// 128 bits from the OS CSPRNG, as hex.
    pub fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 16];
        getrandom::getrandom(&mut bytes)?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        if !raw.is_empty()
            && raw.len() <= Self::MAX_LEN
            && raw.bytes().all(|b| b.is_ascii_graphic())
        {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidId("is not a lease token"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A successful claim: what the worker needs to run one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub lease_token: LeaseToken,
    pub lease_duration: Duration,
    pub attempt: u32,
    pub max_attempts: u32,
    pub tool: ToolName,
    pub request: JsonObject,
    /// How long the task waited, from its creation to this claim, when the
    /// store knows (for the queue-wait metric).
    pub waited: Option<Duration>,
    /// Whether the worker session the claim named keeps the attempt alive:
    /// false when it named none, or its session was already over (then the
    /// attempt's own lease must be renewed, as without a session).
    pub in_session: bool,
}

/// The answer to a lease renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    KeepRunning,
    /// Stop at once and store nothing.
    Stop(StopReason),
}

impl Renewal {
    /// Whether an attempt goes on, from its task's status (`None`: gone)
    /// and whether the attempt's lease is the task's current one.
    pub fn of_attempt(status: Option<TaskStatus>, lease_is_ours: bool) -> Self {
        match status {
            Some(status) if lease_is_ours && !status.is_terminal() => Renewal::KeepRunning,
            status => Renewal::Stop(StopReason::for_task(status, lease_is_ours)),
        }
    }
}

/// Why a running attempt must stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    Cancelled,
    /// Completed or failed without this attempt.
    Finished,
    /// Expired or deleted.
    Gone,
    /// Another claim (or none) holds the task now.
    LeaseLost,
}

impl StopReason {
    /// Why a renewal that did not apply says stop, from the task as it is
    /// (`None`: not there) and whether the lease is still the caller's.
    pub fn for_task(status: Option<TaskStatus>, lease_is_ours: bool) -> Self {
        match status {
            None => StopReason::Gone,
            Some(TaskStatus::Cancelled) => StopReason::Cancelled,
            Some(_) if !lease_is_ours => StopReason::LeaseLost,
            Some(TaskStatus::Completed | TaskStatus::Failed) => StopReason::Finished,
            // Ours and not terminal, yet not renewed: the lease ran out.
            Some(TaskStatus::Working | TaskStatus::InputRequired) => StopReason::LeaseLost,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use taskstore_proto::protocol::{
            STOP_CANCELLED, STOP_FINISHED, STOP_GONE, STOP_LEASE_LOST,
        };
        f.write_str(match self {
            StopReason::Cancelled => STOP_CANCELLED,
            StopReason::Finished => STOP_FINISHED,
            StopReason::Gone => STOP_GONE,
            StopReason::LeaseLost => STOP_LEASE_LOST,
        })
    }
}

/// Why a worker gives a claimed task back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseReason {
    /// The tool failed in a way a retry may fix: uses an attempt.
    RetryableError,
    /// The worker is stopping: the attempt does not count.
    Shutdown,
    /// The tool waits for an answer longer than the worker holds a slot for
    /// it: the attempt does not count, and the answer dispatches the task
    /// again.
    Parked,
    /// The tool was told to wait `wait` (a Retry-After): the attempt does
    /// not count, and the task and every other task of its key
    /// ([`pause_key`]) wait that long.
    BackOff { wait: Duration },
}

/// The longest back-off a tool may ask for.
pub const MAX_BACK_OFF: Duration = Duration::from_secs(24 * 3600);

/// The key a back-off pauses: the task's rate key if its tool declares a
/// rate, else its concurrency key, else the whole tool (`""`).
/// PostgreSQL's decision says the same in SQL (`store/postgres/governed.rs`:
/// `COALESCE(rate_key, limit_key, '')`).
pub fn pause_key<'a>(rate_key: Option<&'a str>, limit_key: Option<&'a str>) -> &'a str {
    rate_key.or(limit_key).unwrap_or("")
}

/// What became of a released task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReleaseOutcome {
    /// Dispatched again; the next attempt may start after this delay.
    Retry { after: Duration },
    /// Out of attempts: stored as FAILED.
    Failed,
    /// Parked until its questions are answered.
    Parked,
}

/// Leases, attempts and retry backoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExecutionPolicy {
    /// How long a claim lasts without renewal. A task whose worker died is
    /// dispatched again at most this plus the reaper interval later.
    pub lease_duration: Duration,
    pub default_max_attempts: u32,
    /// The longest `max_attempts` a caller may ask for.
    pub max_max_attempts: u32,
    /// Retry backoff: `base * 2^(attempt-1)`, capped at `backoff_max`, with
    /// "equal jitter" (half fixed, half random) so retries of many tasks
    /// that failed together spread out.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// How long a job for a tool no worker serves waits before it is
    /// offered again.
    pub unroutable_retry: Duration,
    /// How long a published job may go unclaimed before it is published
    /// again, in case the broker lost it (see
    /// [`ExecutionPolicy::republish_interval`]).
    pub republish_after: Duration,
}

/// The longest a published, unclaimed job waits between two publishes.
pub const MAX_REPUBLISH_INTERVAL: Duration = Duration::from_secs(600);

impl Default for ExecutionPolicy {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            default_max_attempts: 3,
            max_max_attempts: 100,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            unroutable_retry: Duration::from_secs(5),
            republish_after: Duration::from_secs(60),
        }
    }
}

impl ExecutionPolicy {
    /// The delay before attempt `failed_attempt + 1`, given a random value
    /// in `[0, 1)`.
    pub fn backoff(&self, failed_attempt: u32, random: f64) -> Duration {
        let exponent = failed_attempt.saturating_sub(1).min(30);
        let ceiling = self
            .backoff_base
            .saturating_mul(1 << exponent)
            .min(self.backoff_max);
        let half = ceiling / 2;
        half + half.mul_f64(random.clamp(0.0, 1.0))
    }

    /// How long after its `publishes`-th publish (1 for the first) a job
    /// that no worker claimed is published again: `republish_after`,
    /// doubling with each publish, at most [`MAX_REPUBLISH_INTERVAL`]. A job
    /// the broker lost is so published again within `republish_after` plus
    /// as long as it had waited in the queue, never more than the maximum;
    /// one that only waits behind busy workers costs a duplicate now and
    /// then, which its claim fences. (PostgreSQL's forgetter states the
    /// same rule in SQL: `postgres/handoff.rs`.)
    pub fn republish_interval(&self, publishes: u32) -> Duration {
        let exponent = publishes.saturating_sub(1).min(30);
        self.republish_after
            .saturating_mul(1 << exponent)
            .min(MAX_REPUBLISH_INTERVAL)
    }

    /// A uniformly random value in `[0, 1)` for [`ExecutionPolicy::backoff`].
    pub fn jitter() -> f64 {
        let mut bytes = [0u8; 4];
        match getrandom::getrandom(&mut bytes) {
            Ok(()) => f64::from(u32::from_le_bytes(bytes)) / (f64::from(u32::MAX) + 1.0),
            Err(_) => 0.5,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_with_bounded_jitter() {
        let policy = ExecutionPolicy {
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            ..ExecutionPolicy::default()
        };
        assert_eq!(policy.backoff(1, 0.0), Duration::from_millis(500));
        assert_eq!(policy.backoff(2, 0.0), Duration::from_secs(1));
        let third = policy.backoff(3, 0.999_999);
        assert!(
            third >= Duration::from_secs(2) && third < Duration::from_secs(4),
            "{third:?}"
        );
        assert_eq!(
            policy.backoff(10, 0.0),
            Duration::from_secs(4),
            "capped at max"
        );
        assert!(policy.backoff(u32::MAX, 1.0) <= Duration::from_secs(8));
        for _ in 0..100 {
            let j = ExecutionPolicy::jitter();
            assert!((0.0..1.0).contains(&j));
        }
    }

    #[test]
    fn an_unclaimed_job_is_published_again_ever_less_often() {
        let policy = ExecutionPolicy {
            republish_after: Duration::from_secs(60),
            ..ExecutionPolicy::default()
        };
        let after = |n| policy.republish_interval(n);
        assert_eq!(
            after(0),
            Duration::from_secs(60),
            "never published: as once"
        );
        assert_eq!(after(1), Duration::from_secs(60));
        assert_eq!(after(2), Duration::from_secs(120));
        assert_eq!(after(3), Duration::from_secs(240));
        assert_eq!(after(5), MAX_REPUBLISH_INTERVAL, "capped");
        assert_eq!(after(u32::MAX), MAX_REPUBLISH_INTERVAL);
    }

    #[test]
    fn a_refused_renewal_says_why() {
        use StopReason::*;
        assert_eq!(StopReason::for_task(None, false), Gone);
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::Cancelled), true),
            Cancelled
        );
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::Cancelled), false),
            Cancelled
        );
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::Completed), true),
            Finished
        );
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::Failed), false),
            LeaseLost
        );
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::Working), false),
            LeaseLost
        );
        assert_eq!(
            StopReason::for_task(Some(TaskStatus::InputRequired), true),
            LeaseLost
        );
    }

    #[test]
    fn tool_names_and_tokens() {
        assert!(ToolName::parse("echo").is_ok());
        assert!(ToolName::parse("no spaces").is_err());
        let token = LeaseToken::generate().expect("randomness");
        assert_eq!(LeaseToken::parse(token.as_str()), Ok(token));
        assert!(LeaseToken::parse("").is_err());
        assert!(LeaseToken::parse(&"a".repeat(65)).is_err());
    }
}
