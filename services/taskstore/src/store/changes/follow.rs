//! Every change to a scope's tasks, as a stream ([`TaskStore::follow_tasks`]):
//! what MCP status notifications, gRPC `WatchTasks` and the dashboard's
//! live views are made of. Events carry the task; only an event without it
//! costs a read.

use std::pin::Pin;
use std::sync::Arc;

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
    let state = (store, subscription, scope);
    Box::pin(futures_util::stream::unfold(
        state,
        |(store, mut subscription, scope)| async move {
            let item = next_item(&store, &mut subscription, &scope).await?;
            Some((item, (store, subscription, scope)))
        },
    ))
}

async fn next_item<S: TaskStore>(
    store: &S,
    subscription: &mut TenantSubscription,
    scope: &Scope,
) -> Option<Followed> {
    loop {
        let (task_id, news) = match subscription.next().await {
            TenantEvent::Closed => return None,
            TenantEvent::Resync => return Some(Followed::Resync),
            TenantEvent::Changed { task_id, news } => (task_id, news),
        };
        match news {
            News::Task(changed) if in_scope(scope, &changed.task) => {
                return Some(Followed::Changed(changed));
            }
            News::Task(_) => {}
            // (A result handed over goes to one task's subscribers only.)
            News::Status(_) | News::Unknown | News::Finished(_) => {
                if let Some(changed) = read(store, scope, &task_id).await {
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
