//! Liveness per worker (docs/execution.md, "Leases"): a worker process
//! opens a session and renews it, one renewal whatever the number of its
//! attempts. An attempt claimed in a session is alive while its own lease
//! or its session is; reports stay fenced by the attempt's lease token.

use std::fmt;

use chrono::{DateTime, Utc};

use super::super::ids::InvalidId;

/// A worker process's session, named by the worker (a random id per
/// process start): the key its renewals and its claims share.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct WorkerSession(String);

impl WorkerSession {
    pub const MAX_LEN: usize = 64;

    /// 1 to 64 of `A-Z a-z 0-9 _ - .`.
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.');
        if !raw.is_empty() && raw.len() <= Self::MAX_LEN && raw.bytes().all(allowed) {
            Ok(Self(raw.to_owned()))
        } else {
            Err(InvalidId("must be 1 to 64 of A-Z a-z 0-9 _ - ."))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// Who claims: the worker's name, and its session when it keeps one (a
/// worker without one renews each attempt's lease itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claimant {
    pub worker: String,
    pub session: Option<WorkerSession>,
}

impl Claimant {
    /// A worker that renews each attempt's lease.
    pub fn per_task(worker: &str) -> Self {
        Self {
            worker: worker.to_owned(),
            session: None,
        }
    }
}

/// The answer to a session's renewal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionRenewal {
    /// Every attempt claimed in it lives on, for `lease_duration` unless
    /// renewed again.
    KeepRunning { lease_duration: std::time::Duration },
    /// The session expired (or was never opened): its attempts are not the
    /// worker's any more and must stop, storing nothing. Open a new one.
    Over,
}

/// Whether a held attempt is alive: its own lease has not expired (a
/// worker renewing each attempt, or the grace a claim starts with), or the
/// session it was claimed in has not. PostgreSQL's `lease_alive!` is the
/// same rule.
pub fn attempt_alive(
    lease_expires_at: DateTime<Utc>,
    session_expires_at: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> bool {
    lease_expires_at >= now || claim_binds_session(session_expires_at, now)
}

/// Whether a session (`None`: unknown) is alive, and so whether a claim
/// naming it is bound to it. A claim in a session already over (its worker
/// froze and has not heard yet) lives by its own lease, which the worker
/// is told to renew, so the attempt is not lost for a session nobody
/// renews. PostgreSQL's `live_session!` is the same rule.
pub fn claim_binds_session(session_expires_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    session_expires_at.is_some_and(|expires| expires >= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeDelta;

    #[test]
    fn a_session_is_a_short_plain_name() {
        assert!(WorkerSession::parse("w-1.a_B").is_ok());
        assert!(WorkerSession::parse("").is_err());
        assert!(WorkerSession::parse(&"a".repeat(65)).is_err());
        assert!(WorkerSession::parse("a b").is_err());
        assert!(WorkerSession::parse("a\u{0}").is_err());
    }

    #[test]
    fn an_attempt_lives_by_its_lease_or_its_session() {
        let now = Utc::now();
        let past = now - TimeDelta::seconds(1);
        let future = now + TimeDelta::seconds(1);
        assert!(attempt_alive(future, None, now));
        assert!(attempt_alive(past, Some(future), now));
        assert!(!attempt_alive(past, None, now));
        assert!(!attempt_alive(past, Some(past), now));
    }
}
