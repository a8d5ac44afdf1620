//! The change feed: every replica learns which task changed, whichever
//! replica changed it, so watches and blocking reads wake without polling.
//! Backends feed a [`ChangeFeed`]; [`watch`] and [`wait_for_result`] build
//! the trait's watch and blocking-read behaviour on it, once for all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;

use super::{TaskStore, TaskWatch};
use crate::domain::{Scope, Task, TaskId, TaskStatus};
use crate::error::StoreError;

/// Nothing notifies when a task expires, so watchers also re-read this often.
const RECHECK_EVERY: Duration = Duration::from_secs(5);

/// One event of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskChange {
    /// This task changed (status, message or last update). `status` is its
    /// status after the change when the source knows it; `None` means "read
    /// the task to find out".
    Changed {
        tenant: String,
        task_id: String,
        status: Option<TaskStatus>,
    },
    /// Changes may have been missed (the feed reconnected): every watcher
    /// should read its task again.
    Resync,
}

/// What a subscriber learns. Later news replaces news not yet taken, which
/// is safe: a terminal status is final, and every other wake leads to a read
/// or to more waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wake {
    /// The task changed, and is now in this status.
    Now(TaskStatus),
    /// The task may have changed (an event without a status, missed events,
    /// or the periodic re-check): read it.
    ReadAgain,
    /// The feed is gone.
    Closed,
}

type TaskKey = (String, String);

/// The subscribers, by task: an event wakes only the watchers of its task,
/// so a thousand open watches cost nothing per unrelated change.
#[derive(Debug, Default)]
struct Subscribers {
    by_task: HashMap<TaskKey, Vec<(u64, watch::Sender<Wake>)>>,
    next_id: u64,
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
        match change {
            TaskChange::Changed {
                tenant,
                task_id,
                status,
            } => {
                let wake = status.map_or(Wake::ReadAgain, Wake::Now);
                for (_, sender) in subscribers
                    .by_task
                    .get(&(tenant, task_id))
                    .into_iter()
                    .flatten()
                {
                    sender.send_replace(wake);
                }
            }
            TaskChange::Resync => {
                for (_, sender) in subscribers.by_task.values().flatten() {
                    sender.send_replace(Wake::ReadAgain);
                }
            }
        }
    }

    /// Follows one task from now on. Subscribe before reading the task, so
    /// that no change between the two is missed.
    pub fn subscribe(&self, scope: &Scope, task_id: &TaskId) -> Subscription {
        let key = (
            scope.tenant.as_str().to_owned(),
            task_id.as_str().to_owned(),
        );
        let (sender, receiver) = watch::channel(Wake::ReadAgain);
        let mut subscribers = locked(&self.subscribers);
        let id = subscribers.next_id;
        subscribers.next_id += 1;
        subscribers
            .by_task
            .entry(key.clone())
            .or_default()
            .push((id, sender));
        Subscription {
            feed: Arc::downgrade(&self.subscribers),
            key,
            id,
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
    receiver: watch::Receiver<Wake>,
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
        tokio::select! {
            () = tokio::time::sleep(RECHECK_EVERY) => Wake::ReadAgain,
            changed = self.receiver.changed() => match changed {
                Ok(()) => *self.receiver.borrow_and_update(),
                Err(_) => Wake::Closed,
            },
        }
    }
}

/// [`TaskStore::watch_task`] over a change feed. Subscribes before the first
/// read, so no change between the two is missed.
pub async fn watch<S>(
    store: S,
    feed: &ChangeFeed,
    scope: Scope,
    task_id: TaskId,
) -> Result<TaskWatch, StoreError>
where
    S: TaskStore + Clone,
{
    let mut changes = feed.subscribe(&scope, &task_id);
    let first = store.get_task(&scope, &task_id).await?;
    let (sender, receiver) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut last = first.clone();
        if sender.send(Ok(first)).await.is_err() || last.status.is_terminal() {
            return;
        }
        loop {
            let woke = tokio::select! {
                () = sender.closed() => return,
                woke = changes.next() => woke,
            };
            // A watcher shows every change (message, progress), so any wake
            // means a read.
            if woke == Wake::Closed {
                return;
            }
            match store.get_task(&scope, &task_id).await {
                Ok(task) if task == last => {}
                Ok(task) => {
                    let terminal = task.status.is_terminal();
                    last = task.clone();
                    if sender.send(Ok(task)).await.is_err() || terminal {
                        return;
                    }
                }
                // Gone (expired): say so and end.
                Err(err @ StoreError::NotFound) => {
                    let _ = sender.send(Err(err)).await;
                    return;
                }
                // The database may be briefly away; the next event or
                // re-check tries again.
                Err(err) => tracing::debug!(error = %err, "watch re-read failed; retrying"),
            }
        }
    });
    Ok(Box::pin(ReceiverStream::new(receiver)))
}

/// Waits (up to `timeout`) until the task is terminal; then, or at the
/// timeout, returns what [`TaskStore::get_result`] says.
pub async fn wait_for_result<S>(
    store: &S,
    feed: &ChangeFeed,
    scope: &Scope,
    task_id: &TaskId,
    timeout: Duration,
) -> Result<crate::domain::TaskResult, StoreError>
where
    S: TaskStore + ?Sized,
{
    // Before the first read, so that no change between the two is missed.
    let mut changes = feed.subscribe(scope, task_id);
    let deadline = tokio::time::Instant::now() + timeout;
    let mut read = true;
    loop {
        if read {
            let task: Task = store.get_task(scope, task_id).await?;
            if task.status.is_terminal() {
                break;
            }
        }
        let woke = tokio::select! {
            () = tokio::time::sleep_until(deadline) => Wake::Closed,
            woke = changes.next() => woke,
        };
        match woke {
            // Finished: the result read below is the only read needed.
            Wake::Now(status) if status.is_terminal() => break,
            // Progress on a running task: nothing to read yet.
            Wake::Now(_) => read = false,
            Wake::ReadAgain => read = true,
            Wake::Closed => break,
        }
    }
    store.get_result(scope, task_id).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(raw: &str) -> TaskId {
        TaskId::parse(raw).expect("valid id")
    }

    fn changed(task_id: &str, status: Option<TaskStatus>) -> TaskChange {
        TaskChange::Changed {
            tenant: Scope::tenant_wide().tenant.as_str().to_owned(),
            task_id: task_id.to_owned(),
            status,
        }
    }

    /// The next wake, or `None` if nothing arrives within a moment (well
    /// under the periodic re-check).
    async fn woke(subscription: &mut Subscription) -> Option<Wake> {
        tokio::time::timeout(Duration::from_millis(50), subscription.next())
            .await
            .ok()
    }

    #[tokio::test]
    async fn a_change_wakes_only_the_subscribers_of_its_task() {
        let feed = ChangeFeed::default();
        let scope = Scope::tenant_wide();
        let (mut a1, mut a2, mut b) = (
            feed.subscribe(&scope, &id("a")),
            feed.subscribe(&scope, &id("a")),
            feed.subscribe(&scope, &id("b")),
        );
        feed.publish(changed("a", Some(TaskStatus::Working)));
        assert_eq!(woke(&mut a1).await, Some(Wake::Now(TaskStatus::Working)));
        assert_eq!(woke(&mut a2).await, Some(Wake::Now(TaskStatus::Working)));
        assert_eq!(woke(&mut b).await, None);

        // Another tenant's task of the same id is another task.
        feed.publish(TaskChange::Changed {
            tenant: "other".into(),
            task_id: "b".into(),
            status: None,
        });
        assert_eq!(woke(&mut b).await, None);
        feed.publish(changed("b", None));
        assert_eq!(woke(&mut b).await, Some(Wake::ReadAgain));
    }

    #[tokio::test]
    async fn news_not_yet_taken_is_replaced_by_later_news() {
        let feed = ChangeFeed::default();
        let mut a = feed.subscribe(&Scope::tenant_wide(), &id("a"));
        feed.publish(changed("a", Some(TaskStatus::InputRequired)));
        feed.publish(changed("a", Some(TaskStatus::Completed)));
        assert_eq!(woke(&mut a).await, Some(Wake::Now(TaskStatus::Completed)));
        assert_eq!(woke(&mut a).await, None);
    }

    #[tokio::test]
    async fn a_resync_wakes_everyone_to_read_again() {
        let feed = ChangeFeed::default();
        let scope = Scope::tenant_wide();
        let (mut a, mut b) = (
            feed.subscribe(&scope, &id("a")),
            feed.subscribe(&scope, &id("b")),
        );
        feed.publish(TaskChange::Resync);
        assert_eq!(woke(&mut a).await, Some(Wake::ReadAgain));
        assert_eq!(woke(&mut b).await, Some(Wake::ReadAgain));
    }

    #[tokio::test]
    async fn dropped_subscriptions_leave_nothing_behind_and_a_dropped_feed_closes_the_rest() {
        let feed = ChangeFeed::default();
        let scope = Scope::tenant_wide();
        let subscriptions: Vec<_> = (0..3)
            .map(|n| feed.subscribe(&scope, &id(&format!("t{}", n % 2))))
            .collect();
        assert_eq!(locked(&feed.subscribers).by_task.len(), 2);
        drop(subscriptions);
        assert!(locked(&feed.subscribers).by_task.is_empty());

        let mut left = feed.subscribe(&scope, &id("a"));
        drop(feed);
        assert_eq!(woke(&mut left).await, Some(Wake::Closed));
    }
}
