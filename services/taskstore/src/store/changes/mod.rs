//! The change feed: every replica learns which task changed, whichever
//! replica changed it, and (as a rule) the task as it is after the change,
//! so that watchers, waiting calls and streams need no read per event.
//! Backends feed a [`ChangeFeed`]; [`watch`], [`wait_for_result`] and
//! [`follow`] build the trait's watch, blocking read and tenant-wide
//! follow on it, once for all.
//!
//! Two kinds of subscriber: one task's (a watch, a waiting call: news not
//! yet taken is replaced by later news, which is safe because a terminal
//! status is final) and a tenant's (every change, in order, bounded: one
//! that falls behind is told to resync rather than holding memory).

mod follow;
mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use tokio::sync::{broadcast, watch as latest};

pub use follow::{Followed, TaskFollow, follow};
pub use watch::{wait_for_result, watch};

use crate::domain::{ProgressToken, Scope, Task, TaskId, TaskResult, TaskStatus};

/// Nothing notifies when a task expires, so watchers also re-read this often.
const RECHECK_EVERY: Duration = Duration::from_secs(5);

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
    by_task: HashMap<TaskKey, Vec<(u64, latest::Sender<Wake>)>>,
    by_tenant: HashMap<String, broadcast::Sender<TaskChange>>,
    next_id: u64,
}

/// The sending side, shared by a backend's writers or listener.
#[derive(Debug, Clone, Default)]
pub struct ChangeFeed {
    subscribers: Arc<Mutex<Subscribers>>,
}

/// Gives one task's subscriber the latest news, except that a result handed
/// over is kept until taken: the task is terminal, so nothing later can say
/// more, and the notification of the same change would cost a read.
fn tell(sender: &latest::Sender<Wake>, news: News) {
    sender.send_if_modified(|current| {
        if matches!(current, Wake::News(News::Finished(_))) {
            return false;
        }
        *current = Wake::News(news);
        true
    });
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
                for (_, sender) in subscribers.by_task.get(&key).into_iter().flatten() {
                    tell(sender, news.clone());
                }
                if let Some(sender) = subscribers.by_tenant.get(tenant) {
                    // No receiver left is fine: it is being dropped.
                    let _ = sender.send(change.clone());
                }
            }
            TaskChange::Resync => {
                for (_, sender) in subscribers.by_task.values().flatten() {
                    sender.send_replace(Wake::ReadAgain);
                }
                for sender in subscribers.by_tenant.values() {
                    let _ = sender.send(TaskChange::Resync);
                }
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
        for (_, sender) in list {
            tell(sender, news.clone());
        }
    }

    /// Follows one task from now on. Subscribe before reading the task, so
    /// that no change between the two is missed.
    pub fn subscribe(&self, scope: &Scope, task_id: &TaskId) -> Subscription {
        let key = (
            scope.tenant.as_str().to_owned(),
            task_id.as_str().to_owned(),
        );
        let (sender, receiver) = latest::channel(Wake::ReadAgain);
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
    receiver: latest::Receiver<Wake>,
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
                Ok(()) => self.receiver.borrow_and_update().clone(),
                Err(_) => Wake::Closed,
            },
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
mod tests {
    use super::*;

    fn id(raw: &str) -> TaskId {
        TaskId::parse(raw).expect("valid id")
    }

    fn tenant() -> String {
        Scope::tenant_wide().tenant.as_str().to_owned()
    }

    fn changed(task_id: &str, news: News) -> TaskChange {
        TaskChange::Changed {
            tenant: tenant(),
            task_id: task_id.to_owned(),
            news,
        }
    }

    /// The next wake, or `None` if nothing arrives within a moment (well
    /// under the periodic re-check).
    async fn woke(subscription: &mut Subscription) -> Option<Wake> {
        tokio::time::timeout(Duration::from_millis(50), subscription.next())
            .await
            .ok()
    }

    async fn heard(subscription: &mut TenantSubscription) -> Option<TenantEvent> {
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
        let working = News::Status(TaskStatus::Working);
        feed.publish(changed("a", working.clone()));
        assert_eq!(woke(&mut a1).await, Some(Wake::News(working.clone())));
        assert_eq!(woke(&mut a2).await, Some(Wake::News(working)));
        assert_eq!(woke(&mut b).await, None);

        // Another tenant's task of the same id is another task.
        feed.publish(TaskChange::Changed {
            tenant: "other".into(),
            task_id: "b".into(),
            news: News::Unknown,
        });
        assert_eq!(woke(&mut b).await, None);
        feed.publish(changed("b", News::Unknown));
        assert_eq!(woke(&mut b).await, Some(Wake::News(News::Unknown)));
    }

    fn finished(task_id: &str) -> TaskResult {
        let now = chrono::Utc::now();
        TaskResult {
            task: Task {
                task_id: id(task_id),
                status: TaskStatus::Completed,
                status_message: None,
                created_at: now,
                last_updated_at: now,
                ttl: None,
                poll_interval: Duration::from_secs(1),
                session_id: None,
                tool: None,
            },
            result: crate::domain::JsonObject::parse(r#"{"content":[]}"#).expect("json"),
        }
    }

    #[tokio::test]
    async fn a_result_handed_over_reaches_its_tasks_subscribers_and_outlives_later_news() {
        let feed = ChangeFeed::default();
        let scope = Scope::tenant_wide();
        let (mut a, mut b) = (
            feed.subscribe(&scope, &id("a")),
            feed.subscribe(&scope, &id("b")),
        );
        let mut tenant_wide = feed.subscribe_tenant(&tenant());
        let stored = finished("a");
        feed.hand_over(&tenant(), "a", stored.clone());
        // The notification of the same change arrives after it.
        feed.publish(changed("a", News::Status(TaskStatus::Completed)));
        let woken = woke(&mut a).await;
        let Some(Wake::News(News::Finished(result))) = woken else {
            panic!("the result was replaced: {woken:?}");
        };
        assert_eq!(*result, stored);
        assert_eq!(woke(&mut b).await, None);
        assert!(
            matches!(
                heard(&mut tenant_wide).await,
                Some(TenantEvent::Changed { .. })
            ),
            "tenants hear the change once, from the feed"
        );
        assert_eq!(heard(&mut tenant_wide).await, None);
    }

    #[tokio::test]
    async fn news_not_yet_taken_is_replaced_by_later_news() {
        let feed = ChangeFeed::default();
        let mut a = feed.subscribe(&Scope::tenant_wide(), &id("a"));
        feed.publish(changed("a", News::Status(TaskStatus::InputRequired)));
        feed.publish(changed("a", News::Status(TaskStatus::Completed)));
        assert_eq!(
            woke(&mut a).await,
            Some(Wake::News(News::Status(TaskStatus::Completed)))
        );
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
        let mut whole = feed.subscribe_tenant(&tenant());
        feed.publish(TaskChange::Resync);
        assert_eq!(woke(&mut a).await, Some(Wake::ReadAgain));
        assert_eq!(woke(&mut b).await, Some(Wake::ReadAgain));
        assert_eq!(heard(&mut whole).await, Some(TenantEvent::Resync));
    }

    #[tokio::test]
    async fn a_tenant_subscriber_hears_its_tenant_in_order_and_resyncs_when_behind() {
        let feed = ChangeFeed::default();
        let mut acme = feed.subscribe_tenant(&tenant());
        let mut other = feed.subscribe_tenant("other");
        feed.publish(changed("a", News::Status(TaskStatus::Working)));
        feed.publish(changed("b", News::Unknown));
        assert_eq!(
            heard(&mut acme).await,
            Some(TenantEvent::Changed {
                task_id: "a".into(),
                news: News::Status(TaskStatus::Working)
            })
        );
        assert_eq!(
            heard(&mut acme).await,
            Some(TenantEvent::Changed {
                task_id: "b".into(),
                news: News::Unknown
            })
        );
        assert_eq!(
            heard(&mut other).await,
            None,
            "another tenant hears nothing"
        );

        for n in 0..=TENANT_BACKLOG {
            feed.publish(changed(&format!("t{n}"), News::Unknown));
        }
        assert_eq!(heard(&mut acme).await, Some(TenantEvent::Resync));
    }

    #[tokio::test]
    async fn dropped_subscriptions_leave_nothing_behind_and_a_dropped_feed_closes_the_rest() {
        let feed = ChangeFeed::default();
        let scope = Scope::tenant_wide();
        let subscriptions: Vec<_> = (0..3)
            .map(|n| feed.subscribe(&scope, &id(&format!("t{}", n % 2))))
            .collect();
        let tenants: Vec<_> = (0..2).map(|_| feed.subscribe_tenant(&tenant())).collect();
        assert_eq!(locked(&feed.subscribers).by_task.len(), 2);
        assert_eq!(locked(&feed.subscribers).by_tenant.len(), 1);
        drop(subscriptions);
        drop(tenants);
        assert!(locked(&feed.subscribers).by_task.is_empty());
        assert!(locked(&feed.subscribers).by_tenant.is_empty());

        let mut left = feed.subscribe(&scope, &id("a"));
        let mut whole = feed.subscribe_tenant(&tenant());
        drop(feed);
        assert_eq!(woke(&mut left).await, Some(Wake::Closed));
        assert_eq!(heard(&mut whole).await, Some(TenantEvent::Closed));
    }
}
