//! Every change to a scope's tasks, as a stream ([`TaskStore::follow_tasks`]):
//! what MCP status notifications, gRPC `WatchTasks` and the dashboard's
//! live views are made of. Events carry the task; only an event without it
//! costs a read.

use std::collections::{HashSet, VecDeque};
use std::pin::Pin;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use tokio_stream::Stream;

use super::watch::in_scope;
use super::{ChangeFeed, ChangedTask, News, TenantEvent, TenantSubscription};
use crate::domain::{Scope, TaskId};
use crate::error::StoreError;
use crate::store::TaskStore;

/// One item of a follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Followed {
    /// A task of the scope changed; this is it now.
    Changed(Arc<ChangedTask>),
    /// Changes may have been missed: read again whatever is shown.
    Resync,
}

/// The stream [`TaskStore::follow_tasks`] returns; it ends only when the
/// store goes away.
pub type TaskFollow = Pin<Box<dyn Stream<Item = Followed> + Send>>;

/// [`TaskStore::follow_tasks`] over a change feed.
pub fn follow<S>(store: S, feed: &ChangeFeed, scope: Scope) -> TaskFollow
where
    S: TaskStore + Clone,
{
    let subscription = feed.subscribe_tenant(scope.tenant.as_str());
    let state = (store, subscription, scope, Ended::default());
    Box::pin(futures_util::stream::unfold(
        state,
        |(store, mut subscription, scope, mut ended)| async move {
            let item = next_item(&store, &mut subscription, &scope, &mut ended).await?;
            Some((item, (store, subscription, scope, ended)))
        },
    ))
}

/// How many ended tasks a follow remembers.
const REMEMBER_ENDED: usize = 256;

/// The tasks a follow showed ending lately (by id and creation, since an
/// expired task's id may be reused): a report of one as running that is
/// told after its end is stale (see `slot.rs`), and is not shown. A
/// stale report follows the end within moments, so the last few hundred
/// ends are enough; the oldest are forgotten first.
#[derive(Default)]
struct Ended {
    order: VecDeque<(String, DateTime<Utc>)>,
    known: HashSet<(String, DateTime<Utc>)>,
}

impl Ended {
    /// Whether `changed` may be shown, remembering it if it ended.
    fn shows(&mut self, changed: &ChangedTask) -> bool {
        let key = (
            changed.task.task_id.as_str().to_owned(),
            changed.task.created_at,
        );
        if !changed.task.status.is_terminal() {
            return !self.known.contains(&key);
        }
        if self.known.insert(key.clone()) {
            self.order.push_back(key);
            if self.order.len() > REMEMBER_ENDED
                && let Some(oldest) = self.order.pop_front()
            {
                self.known.remove(&oldest);
            }
        }
        true
    }
}

async fn next_item<S: TaskStore>(
    store: &S,
    subscription: &mut TenantSubscription,
    scope: &Scope,
    ended: &mut Ended,
) -> Option<Followed> {
    loop {
        let (task_id, news) = match subscription.next().await {
            TenantEvent::Closed => return None,
            TenantEvent::Resync => return Some(Followed::Resync),
            TenantEvent::Changed { task_id, news } => (task_id, news),
        };
        match news {
            News::Task(changed) if in_scope(scope, &changed.task) => {
                if ended.shows(&changed) {
                    return Some(Followed::Changed(changed));
                }
            }
            News::Task(_) => {}
            // (A result handed over goes to one task's subscribers only.)
            News::Status(_) | News::Unknown | News::Finished(_) => {
                if let Some(changed) = read(store, scope, &task_id).await
                    && ended.shows(&changed)
                {
                    return Some(Followed::Changed(changed));
                }
            }
        }
    }
}

/// The task now, for an event that did not carry it; `None` when the scope
/// does not see it (another session's, gone) or it cannot be read now.
async fn read<S: TaskStore>(store: &S, scope: &Scope, task_id: &str) -> Option<Arc<ChangedTask>> {
    let task_id = TaskId::parse(task_id).ok()?;
    match store.get_task(scope, &task_id).await {
        Ok(task) => Some(Arc::new(ChangedTask {
            task,
            // Not in the event, and not worth a second read: this change
            // gets a status notification without a progress one.
            progress_token: None,
        })),
        Err(StoreError::NotFound) => None,
        Err(err) => {
            tracing::warn!(error = %err, task_id = %task_id, "followed task could not be read; skipping its change");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Task, TaskStatus};

    fn news(id: &str, status: TaskStatus, created_at: DateTime<Utc>) -> ChangedTask {
        ChangedTask {
            task: Task {
                task_id: TaskId::parse(id).expect("id"),
                status,
                status_message: None,
                created_at,
                last_updated_at: created_at,
                ttl: None,
                poll_interval: std::time::Duration::from_secs(1),
                session_id: None,
                tool: None,
            },
            progress_token: None,
        }
    }

    #[test]
    fn a_task_shown_ended_is_not_shown_running_again_unless_its_id_is_reused() {
        let (mut ended, created) = (Ended::default(), Utc::now());
        assert!(ended.shows(&news("a", TaskStatus::Working, created)));
        assert!(ended.shows(&news("a", TaskStatus::Cancelled, created)));
        assert!(!ended.shows(&news("a", TaskStatus::Working, created)));
        assert!(ended.shows(&news("a", TaskStatus::Cancelled, created)));
        // An expired task's id, reused by a new task.
        let reused = created + chrono::TimeDelta::seconds(1);
        assert!(ended.shows(&news("a", TaskStatus::Working, reused)));
        // The oldest ends are forgotten first.
        for n in 0..REMEMBER_ENDED {
            assert!(ended.shows(&news(&format!("t{n}"), TaskStatus::Completed, created)));
        }
        assert!(ended.shows(&news("a", TaskStatus::Working, created)));
        assert!(!ended.shows(&news("t1", TaskStatus::Working, created)));
        assert_eq!(ended.known.len(), REMEMBER_ENDED);
    }
}
