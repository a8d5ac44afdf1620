//! One task subscriber's news not yet taken. Later news replaces earlier
//! news (a watcher wants the task as it is now, not every step on the
//! way), except where that would hide something ([`merge`]).
//!
//! Why order alone cannot decide: news reaches a replica by two roads that
//! are not ordered with each other, the listener (other replicas' changes)
//! and this replica's own tells (quiet changes, progress notices). A
//! progress notice whose snapshot preceded a cancellation can be told
//! after the cancellation arrived: taken as "the task now", it would hide
//! the cancellation from the attempt's follow for good.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use tokio::sync::Notify;

use super::{News, Wake};

/// The pending news of one subscriber, and its wake-up.
#[derive(Debug, Default)]
pub(super) struct Slot {
    pending: Mutex<Option<Wake>>,
    /// The feed is gone: nothing more will come.
    closed: AtomicBool,
    woken: Notify,
}

impl Slot {
    /// Adds `wake` to what the subscriber has not taken yet.
    pub(super) fn tell(&self, wake: Wake) {
        {
            let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
            *pending = Some(merge(pending.take(), wake));
        }
        // Stored as a permit when nobody waits: the next wait sees it.
        self.woken.notify_one();
    }

    /// The feed is gone; news already pending is still taken first.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.woken.notify_one();
    }

    /// The pending news, waiting for some. Cancel-safe: news stays
    /// pending until a call returns it.
    pub(super) async fn next(&self) -> Wake {
        loop {
            let taken = self
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            if let Some(wake) = taken {
                return wake;
            }
            if self.closed.load(Ordering::Acquire) {
                return Wake::Closed;
            }
            self.woken.notified().await;
        }
    }
}

/// What a subscriber should take: the later of two pieces of news, unless
/// the earlier says more. A result handed over says the most (the task
/// ended, and with what); a terminal state is final, so anything after it
/// is stale or says the same; a read covers every change before it.
pub(super) fn merge(pending: Option<Wake>, new: Wake) -> Wake {
    let Some(pending) = pending else {
        return new;
    };
    match (&pending, &new) {
        (Wake::Closed, _) | (_, Wake::Closed) => Wake::Closed,
        (Wake::News(News::Finished(_)), _) => pending,
        (_, Wake::News(News::Finished(_))) => new,
        _ if is_final(&pending) => pending,
        _ if is_final(&new) => new,
        (Wake::ReadAgain, _) => pending,
        _ => new,
    }
}

/// News of a terminal state.
fn is_final(wake: &Wake) -> bool {
    match wake {
        Wake::News(News::Task(changed)) => changed.task.status.is_terminal(),
        Wake::News(News::Status(status)) => status.is_terminal(),
        Wake::News(News::Finished(_)) => true,
        Wake::News(News::Unknown) | Wake::ReadAgain | Wake::Closed => false,
    }
}
