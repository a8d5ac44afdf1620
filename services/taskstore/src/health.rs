//! The job queue's health as the outbox relay sees it: written by the relay
//! at each change of state, read by `Operations.GetStatus`. Tasks are still
//! accepted while the queue is down (the outbox keeps their jobs); this is
//! how operators see that the service runs degraded.

use std::sync::{Arc, Mutex, PoisonError};

use chrono::{DateTime, Utc};

/// One moment's view of the queue connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueState {
    /// `None` until the relay first tried to connect.
    pub connected: Option<bool>,
    /// When the state last changed.
    pub since: Option<DateTime<Utc>>,
    /// Why it is down.
    pub error: Option<String>,
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

    fn locked(&self) -> std::sync::MutexGuard<'_, QueueState> {
        // A plain value replaced whole: a panic cannot leave it half-set.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
