//! Tasks held by their caller: an MCP SDK server that runs a tool in its
//! own process holds the task with a lease, as a fleet worker's attempt
//! does, and renews it. If the process dies, the lease lapses and the
//! reaper ends the task (`failed`, saying its holder stopped) instead of
//! leaving it `working` until its ttl. One attempt: a held task is never
//! dispatched again (its tool runs where its server is).

use std::fmt;

use super::{Effects, LeaseGrant, LeaseToken, StopReason};
use crate::domain::TaskStatus;

/// Who holds it: an SDK server process, named for status messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder(String);

/// The longest holder name kept.
pub const MAX_HOLDER_BYTES: usize = 256;

impl Holder {
    /// `None` for an empty or over-long name.
    pub fn parse(raw: &str) -> Option<Self> {
        let raw = raw.trim();
        (!raw.is_empty() && raw.len() <= MAX_HOLDER_BYTES && !raw.contains(char::is_control))
            .then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A task's state as far as holding goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldState<'a> {
    pub status: TaskStatus,
    /// Dispatched to the fleet, or already held (attempts are counted).
    pub dispatched: bool,
    /// The lease on it now, if any.
    pub lease: Option<&'a LeaseToken>,
}

/// What a hold request comes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldStep {
    /// A first hold: the task gets a lease (one attempt, never
    /// dispatched again).
    Grant,
    /// The holder's lease is extended.
    Renew,
    /// The holder should stop: the task was cancelled, ended, or its lease
    /// lapsed.
    Stop(StopReason),
}

/// What a hold comes to, for the holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldOutcome {
    /// Held: renew within `duration`.
    Held {
        lease: LeaseToken,
        duration: std::time::Duration,
    },
    /// Stop running the tool.
    Stop(StopReason),
}

/// A first hold the task's state refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HoldRefusal {
    #[error("the task is dispatched to the fleet; its workers run it")]
    Dispatched,
    #[error("the task is already held by another holder")]
    HeldByAnother,
    #[error("task is already {0}")]
    Ended(TaskStatus),
    #[error("only a task created by a tools/call request can be held")]
    NotAToolCall,
}

/// What a granted first hold does: the task becomes one attempt, run by
/// `holder` under `token`, that no job dispatches again.
pub fn held_by(holder: &Holder, token: LeaseToken, duration: std::time::Duration) -> Effects {
    let grant = LeaseGrant {
        token,
        owner: holder.as_str().to_owned(),
        duration,
        attempt: 1,
        session: None,
    };
    Effects {
        max_attempts: Some(1),
        ..Effects::of_grant(grant, 1)
    }
}

/// Decides a hold: `renewing` carries the lease the holder has, `None` for
/// a first hold.
pub fn decide_hold(
    state: &HoldState<'_>,
    renewing: Option<&LeaseToken>,
) -> Result<HoldStep, HoldRefusal> {
    match renewing {
        // Ended (its lease lapsed, it was cancelled): say how it ended.
        Some(_) if state.status.is_terminal() => Ok(HoldStep::Stop(StopReason::for_task(
            Some(state.status),
            true,
        ))),
        Some(token) if state.lease == Some(token) => Ok(HoldStep::Renew),
        Some(_) => Ok(HoldStep::Stop(StopReason::LeaseLost)),
        None if state.status.is_terminal() => Err(HoldRefusal::Ended(state.status)),
        None if state.lease.is_some() => Err(HoldRefusal::HeldByAnother),
        None if state.dispatched => Err(HoldRefusal::Dispatched),
        None => Ok(HoldStep::Grant),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskStatus::{Cancelled, Completed, Working};

    fn token(raw: &str) -> LeaseToken {
        LeaseToken::parse(raw).expect("token")
    }

    #[test]
    fn holds_and_renewals() {
        let mine = token("mine");
        let other = token("other");
        let free = HoldState {
            status: Working,
            dispatched: false,
            lease: None,
        };
        assert_eq!(decide_hold(&free, None), Ok(HoldStep::Grant));
        let held = HoldState {
            dispatched: true,
            lease: Some(&mine),
            ..free
        };
        assert_eq!(decide_hold(&held, Some(&mine)), Ok(HoldStep::Renew));
        assert_eq!(
            decide_hold(&held, Some(&other)),
            Ok(HoldStep::Stop(StopReason::LeaseLost))
        );
        assert_eq!(decide_hold(&held, None), Err(HoldRefusal::HeldByAnother));
        let queued = HoldState {
            dispatched: true,
            ..free
        };
        assert_eq!(decide_hold(&queued, None), Err(HoldRefusal::Dispatched));
        let cancelled = HoldState {
            status: Cancelled,
            ..held
        };
        assert_eq!(
            decide_hold(&cancelled, Some(&mine)),
            Ok(HoldStep::Stop(StopReason::Cancelled))
        );
        let done = HoldState {
            status: Completed,
            ..free
        };
        assert_eq!(decide_hold(&done, None), Err(HoldRefusal::Ended(Completed)));
    }

    #[test]
    fn holder_names() {
        assert!(Holder::parse("mcp server x (pid 7)").is_some());
        for bad in ["", "  ", "a\nb", &"x".repeat(300)] {
            assert!(Holder::parse(bad).is_none(), "{bad:?}");
        }
    }
}
