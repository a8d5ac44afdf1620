//! The dependencies' health as the service sees it, read by
//! `Operations.GetStatus`:
//!
//! - the job queue, as the outbox relay sees it: written by the relay at
//!   each change of state. Tasks are still accepted while the queue is down
//!   (the outbox keeps their jobs); this is how operators see that the
//!   service runs degraded.
//! - the database running out of a resource (disk, memory, connections):
//!   it still answers, but refuses work. Each refusal is noted here; the
//!   first of an episode is news (logged once, not per call), and the
//!   episode ends after [`SHORTAGE_QUIET`] without a refusal.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A shortage episode ends after this long without a refusal.
pub const SHORTAGE_QUIET: Duration = Duration::from_secs(30);

/// The database out of a resource: which, in words and as a metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortage {
    /// `disk_full`, `out_of_memory`, `too_many_connections`, …
    pub label: &'static str,
    /// "out of disk space", …
    pub description: &'static str,
}

#[derive(Debug, Clone, Copy)]
struct Episode {
    shortage: Shortage,
    since: DateTime<Utc>,
    last: Instant,
}

/// The database's shortage episodes (one process, every pool).
#[derive(Debug, Default)]
pub struct Shortages {
    episode: Mutex<Option<Episode>>,
}

/// The process's shortages: refusals are noted where database errors are
/// mapped, far from anything that could carry a handle.
pub static DATABASE_SHORTAGES: Shortages = Shortages::new();

impl Shortages {
    pub const fn new() -> Self {
        Self {
            episode: Mutex::new(None),
        }
    }

    /// Notes one refusal for `shortage` at `now`; `true` when it begins an
    /// episode (none open, or another shortage than the open one's).
    pub fn note(&self, shortage: Shortage, now: Instant) -> bool {
        let mut episode = self.episode.lock().unwrap_or_else(PoisonError::into_inner);
        let news = match *episode {
            Some(open) => {
                open.shortage != shortage || now.duration_since(open.last) >= SHORTAGE_QUIET
            }
            None => true,
        };
        let since = match *episode {
            Some(open) if !news => open.since,
            _ => Utc::now(),
        };
        *episode = Some(Episode {
            shortage,
            since,
            last: now,
        });
        news
    }

    /// The open episode at `now`: its shortage and since when.
    pub fn current(&self, now: Instant) -> Option<(Shortage, DateTime<Utc>)> {
        let episode = self.episode.lock().unwrap_or_else(PoisonError::into_inner);
        episode
            .filter(|open| now.duration_since(open.last) < SHORTAGE_QUIET)
            .map(|open| (open.shortage, open.since))
    }
}

/// One moment's view of the queue connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueState {
    /// `None` until the relay first tried to connect.
    pub connected: Option<bool>,
    /// When the state last changed.
    pub since: Option<DateTime<Utc>>,
    /// Why it is down.
    pub error: Option<String>,
    /// Since when the broker blocks publishers (a resource alarm), if it
    /// does.
    pub blocked_since: Option<DateTime<Utc>>,
}

/// A shared, cheap-to-clone handle on the queue's state.
#[derive(Debug, Clone, Default)]
pub struct QueueHealth {
    state: Arc<Mutex<QueueState>>,
}

impl QueueHealth {
    /// A queue that is up by construction (the in-process one).
    pub fn always_up() -> Self {
        let health = Self::default();
        health.up();
        health
    }

    pub fn snapshot(&self) -> QueueState {
        self.locked().clone()
    }

    /// Records that the queue is reachable; `true` when that is news.
    pub fn up(&self) -> bool {
        let mut state = self.locked();
        if state.connected == Some(true) {
            return false;
        }
        *state = QueueState {
            connected: Some(true),
            since: Some(Utc::now()),
            error: None,
            blocked_since: state.blocked_since,
        };
        crate::metrics::queue_up(true);
        true
    }

    /// Records that the queue is unreachable; `true` when that is news (the
    /// error text of a queue that stays down is updated quietly).
    pub fn down(&self, error: String) -> bool {
        let mut state = self.locked();
        let news = state.connected != Some(false);
        if news {
            state.connected = Some(false);
            state.since = Some(Utc::now());
            crate::metrics::queue_up(false);
        }
        state.error = Some(error);
        news
    }

    /// Records whether the broker blocks publishers; `true` when that is
    /// news.
    pub fn blocked(&self, blocked: bool) -> bool {
        let mut state = self.locked();
        if state.blocked_since.is_some() == blocked {
            return false;
        }
        state.blocked_since = blocked.then(Utc::now);
        crate::metrics::queue_blocked(blocked);
        true
    }

    fn locked(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A plain value replaced whole: a panic cannot leave it half-set.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DISK: Shortage = Shortage {
        label: "disk_full",
        description: "out of disk space",
    };
    const MEMORY: Shortage = Shortage {
        label: "out_of_memory",
        description: "out of memory",
    };

    #[test]
    fn a_shortage_is_news_once_per_episode() {
        let shortages = Shortages::new();
        let start = Instant::now();
        assert_eq!(shortages.current(start), None);
        assert!(shortages.note(DISK, start), "the first refusal is news");
        let (_, since) = shortages.current(start).expect("open");
        for second in 1..=100 {
            let at = start + Duration::from_millis(second * 100);
            assert!(!shortages.note(DISK, at), "later refusals are not");
        }
        let later = start + Duration::from_secs(10);
        assert_eq!(shortages.current(later), Some((DISK, since)));
        assert!(shortages.note(MEMORY, later), "another shortage is news");
        let quiet = later + SHORTAGE_QUIET;
        assert_eq!(shortages.current(quiet), None, "over after a quiet spell");
        assert!(
            shortages.note(MEMORY, quiet),
            "and the next refusal is news"
        );
    }

    #[test]
    fn reports_only_changes_as_news() {
        let health = QueueHealth::default();
        assert_eq!(health.snapshot().connected, None);
        assert!(health.down("refused".into()));
        let since = health.snapshot().since;
        assert!(!health.down("still refused".into()), "no news");
        assert_eq!(health.snapshot().since, since, "the outage began earlier");
        assert_eq!(health.snapshot().error.as_deref(), Some("still refused"));
        assert!(health.up());
        assert!(!health.up());
        assert_eq!(health.snapshot().error, None);
        assert!(QueueHealth::always_up().snapshot().connected == Some(true));
    }
}
