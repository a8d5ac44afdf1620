//! The change feed: every replica learns which task changed, whichever
//! replica changed it, and (as a rule) the task as it is after the change,
//! so that watchers, waiting calls and streams need no read per event.
//! Backends feed a [`ChangeFeed`]; [`watch`], [`wait_for_result`] and
//! [`follow`] build the trait's watch, blocking read and tenant-wide
//! follow on it, once for all.
//!
//! Two kinds of subscriber: one task's (a watch, a waiting call: news not
//! yet taken is replaced by later news, unless the earlier says more:
//! `slot.rs`) and a tenant's (every change, in order, bounded: one
//! that falls behind is told to resync rather than holding memory).

mod follow;
mod slot;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::broadcast;

use slot::Slot;

pub use follow::{Followed, TaskFollow, follow};
pub use watch::{wait_for_result, watch};

use crate::domain::{ProgressToken, Scope, Task, TaskId, TaskResult, TaskStatus};

/// Nothing notifies when a task expires, so a waiting call also re-reads
/// this often (a watch re-reads when its task expires: [`Subscription::next_or_at`]).
const RECHECK_EVERY: Duration = Duration::from_secs(5);

/// The longest a watch goes without reading its task when nothing changes
/// (and the task never expires): a re-read that costs nothing measurable
/// per task, should a change ever go unnotified.
const LONGEST_QUIET_WATCH: Duration = Duration::from_secs(3600);

/// Changes a tenant's subscriber may fall behind by before it is told to
/// resync instead.
const TENANT_BACKLOG: usize = 1024;

/// A task as it is after a change, with what streams need besides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedTask {
    pub task: Task,
    /// The `progressToken` of the request that created it, if it had one.
    pub progress_token: Option<ProgressToken>,
}

/// What an event says about the task after the change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum News {
    /// The whole task: nothing to read.
    Task(Arc<ChangedTask>),
    /// Only its status (the task did not fit the notification, or an older
    /// replica's trigger sent it): read the task for the rest.
    Status(TaskStatus),
    /// Nothing: read the task (it may be gone).
    Unknown,
    /// The task ended with this result, handed over in process by the
    /// replica that stored it ([`ChangeFeed::hand_over`]): a waiting call
    /// answers with it without reading the row back. Only one task's
    /// subscribers get it; the notification of the same change follows.
    Finished(Arc<TaskResult>),
}

/// One event of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskChange {
    /// This task changed (status, message or last update).
    Changed {
        tenant: String,
        task_id: String,
        news: News,
    },
    /// Changes may have been missed (the feed reconnected): every watcher
    /// should read its task again.
    Resync,
}

/// What one task's subscriber learns.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wake {
    News(News),
    /// Changes may have been missed, or it is time for the periodic
    /// re-check: read the task.
    ReadAgain,
    /// The feed is gone.
    Closed,
}

type TaskKey = (String, String);

/// The subscribers: one task's by task, so that an event wakes only the
/// watchers of its task; a tenant's by tenant.
#[derive(Debug, Default)]
struct Subscribers {
    by_task: HashMap<TaskKey, Vec<(u64, Arc<Slot>)>>,
    by_tenant: HashMap<String, broadcast::Sender<TaskChange>>,
    next_id: u64,
}

/// The store is gone: its task subscribers hear that nothing more comes.
impl Drop for Subscribers {
    fn drop(&mut self) {
        for (_, slot) in self.by_task.values().flatten() {
            slot.close();
        }
    }
}

/// The sending side, shared by a backend's writers or listener.
#[derive(Debug, Clone, Default)]
pub struct ChangeFeed {
    subscribers: Arc<Mutex<Subscribers>>,
}

fn locked(subscribers: &Mutex<Subscribers>) -> MutexGuard<'_, Subscribers> {
    // The lock guards plain map updates that cannot leave it half-done.
    subscribers.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ChangeFeed {
    pub fn publish(&self, change: TaskChange) {
        let subscribers = locked(&self.subscribers);
        match &change {
            TaskChange::Changed {
                tenant,
                task_id,
                news,
            } => {
                let key = (tenant.clone(), task_id.clone());
                for (_, slot) in subscribers.by_task.get(&key).into_iter().flatten() {
                    slot.tell(Wake::News(news.clone()));
                }
                if let Some(sender) = subscribers.by_tenant.get(tenant) {
                    // No receiver left is fine: it is being dropped.
                    let _ = sender.send(change.clone());
                }
            }
            TaskChange::Resync => {
                for (_, slot) in subscribers.by_task.values().flatten() {
                    slot.tell(Wake::ReadAgain);
                }
                for sender in subscribers.by_tenant.values() {
                    let _ = sender.send(TaskChange::Resync);
                }
            }
        }
    }

    /// Whether anyone here follows this one task (a watch, a waiting call).
    pub fn has_task_subscribers(&self, tenant: &str, task_id: &str) -> bool {
        locked(&self.subscribers)
            .by_task
            .contains_key(&(tenant.to_owned(), task_id.to_owned()))
    }

    /// Whether anyone here follows every change to the tenant's tasks.
    pub fn has_tenant_followers(&self, tenant: &str) -> bool {
        locked(&self.subscribers)
            .by_tenant
            .get(tenant)
            .is_some_and(|sender| sender.receiver_count() > 0)
    }

    /// Whether a change to this task would reach anyone here.
    pub fn is_heard(&self, tenant: &str, task_id: &str) -> bool {
        self.has_task_subscribers(tenant, task_id) || self.has_tenant_followers(tenant)
    }

    /// Publishes a change to its tenant's followers only: its task's
    /// subscribers learn of it otherwise (a result handed over).
    pub fn publish_to_tenant_followers(&self, change: TaskChange) {
        if let TaskChange::Changed { tenant, .. } = &change {
            let subscribers = locked(&self.subscribers);
            if let Some(sender) = subscribers.by_tenant.get(tenant) {
                let _ = sender.send(change.clone());
            }
        }
    }

    /// Tells the subscribers of one task (watchers and waiting calls, not
    /// tenants' followers, who learn of the change from the feed as usual)
    /// that it ended with `result`, stored by this process just now.
    pub fn hand_over(&self, tenant: &str, task_id: &str, result: TaskResult) {
        let key = (tenant.to_owned(), task_id.to_owned());
        let subscribers = locked(&self.subscribers);
        let Some(list) = subscribers.by_task.get(&key) else {
            return;
        };
        let news = News::Finished(Arc::new(result));
        for (_, slot) in list {
            slot.tell(Wake::News(news.clone()));
        }
    }

    /// Tells the subscribers of these tenants (each task's and each
    /// tenant's) to read again: changes to them may have been missed.
    pub fn resync_tenants(&self, tenants: &[String]) {
        let subscribers = locked(&self.subscribers);
        for ((tenant, _), list) in &subscribers.by_task {
            if tenants.contains(tenant) {
                for (_, slot) in list {
                    slot.tell(Wake::ReadAgain);
                }
            }
        }
        for tenant in tenants {
            if let Some(sender) = subscribers.by_tenant.get(tenant) {
                let _ = sender.send(TaskChange::Resync);
            }
        }
    }

    /// The tenants someone follows here now (a task's subscriber or a
    /// tenant's).
    pub fn followed_tenants(&self) -> HashSet<String> {
        let subscribers = locked(&self.subscribers);
        let by_task = subscribers.by_task.keys().map(|(tenant, _)| tenant);
        let by_tenant = subscribers
            .by_tenant
            .iter()
            .filter(|(_, sender)| sender.receiver_count() > 0)
            .map(|(tenant, _)| tenant);
        by_task.chain(by_tenant).cloned().collect()
    }

    /// Follows one task from now on. Subscribe before reading the task, so
    /// that no change between the two is missed.
    pub fn subscribe(&self, scope: &Scope, task_id: &TaskId) -> Subscription {
        let key = (
            scope.tenant.as_str().to_owned(),
            task_id.as_str().to_owned(),
        );
        let slot = Arc::new(Slot::default());
        let mut subscribers = locked(&self.subscribers);
        let id = subscribers.next_id;
        subscribers.next_id += 1;
        subscribers
            .by_task
            .entry(key.clone())
            .or_default()
            .push((id, slot.clone()));
        Subscription {
            feed: Arc::downgrade(&self.subscribers),
            key,
            id,
            slot,
        }
    }

    /// Follows every change to `tenant`'s tasks from now on, in order.
    pub fn subscribe_tenant(&self, tenant: &str) -> TenantSubscription {
        let mut subscribers = locked(&self.subscribers);
        let receiver = subscribers
            .by_tenant
            .entry(tenant.to_owned())
            .or_insert_with(|| broadcast::channel(TENANT_BACKLOG).0)
            .subscribe();
        TenantSubscription {
            feed: Arc::downgrade(&self.subscribers),
            tenant: tenant.to_owned(),
            receiver,
        }
    }
}

/// One watcher's or waiter's interest in one task; dropping it unsubscribes.
#[derive(Debug)]
pub struct Subscription {
    /// Weak, so that a dropped store closes its subscriptions.
    feed: Weak<Mutex<Subscribers>>,
    key: TaskKey,
    id: u64,
    slot: Arc<Slot>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let Some(feed) = self.feed.upgrade() else {
            return;
        };
        let mut subscribers = locked(&feed);
        if let Some(list) = subscribers.by_task.get_mut(&self.key) {
            list.retain(|(id, _)| *id != self.id);
            if list.is_empty() {
                subscribers.by_task.remove(&self.key);
            }
        }
    }
}

impl Subscription {
    /// Waits for news of the task, or the periodic re-check.
    async fn next(&mut self) -> Wake {
        self.next_or_after(RECHECK_EVERY).await
    }

    /// Waits for news of the task, or until `expires_at` (when it may
    /// have expired, which nothing notifies), or [`LONGEST_QUIET_WATCH`].
    /// A watch of a running task costs no periodic read.
    async fn next_or_at(&mut self, expires_at: Option<chrono::DateTime<chrono::Utc>>) -> Wake {
        let until_expiry = expires_at
            .and_then(|at| (at - chrono::Utc::now()).to_std().ok())
            .map(|left| left + Duration::from_millis(10));
        let quiet = until_expiry.map_or(LONGEST_QUIET_WATCH, |left| left.min(LONGEST_QUIET_WATCH));
        self.next_or_after(quiet).await
    }

    async fn next_or_after(&mut self, recheck: Duration) -> Wake {
        tokio::select! {
            () = tokio::time::sleep(recheck) => Wake::ReadAgain,
            wake = self.slot.next() => wake,
        }
    }
}

/// What a tenant's subscriber learns next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TenantEvent {
    Changed {
        task_id: String,
        news: News,
    },
    /// Changes were missed (the feed reconnected, or this subscriber fell
    /// behind): read again whatever is shown.
    Resync,
    /// The feed is gone.
    Closed,
}

/// Interest in every change to one tenant's tasks; dropping it
/// unsubscribes.
#[derive(Debug)]
pub struct TenantSubscription {
    feed: Weak<Mutex<Subscribers>>,
    tenant: String,
    receiver: broadcast::Receiver<TaskChange>,
}

impl TenantSubscription {
    pub async fn next(&mut self) -> TenantEvent {
        match self.receiver.recv().await {
            Ok(TaskChange::Changed { task_id, news, .. }) => TenantEvent::Changed { task_id, news },
            Ok(TaskChange::Resync) | Err(broadcast::error::RecvError::Lagged(_)) => {
                TenantEvent::Resync
            }
            Err(broadcast::error::RecvError::Closed) => TenantEvent::Closed,
        }
    }
}

impl Drop for TenantSubscription {
    fn drop(&mut self) {
        let Some(feed) = self.feed.upgrade() else {
            return;
        };
        let mut subscribers = locked(&feed);
        // This receiver still counts until the fields drop.
        if subscribers
            .by_tenant
            .get(&self.tenant)
            .is_some_and(|sender| sender.receiver_count() <= 1)
        {
            subscribers.by_tenant.remove(&self.tenant);
        }
    }
}

#[cfg(test)]
mod tests;
