//! One task followed over the feed: [`watch`] (every change until the task
//! ends) and [`wait_for_result`] (until it ends). An event that carries the
//! task is used as it is, and a result handed over in process answers a
//! waiting call; only events without them, a resync and the periodic
//! re-check read the store.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use super::{ChangeFeed, News, Wake};
use crate::domain::{Scope, Task, TaskId, TaskResult};
use crate::error::StoreError;
use crate::store::{TaskStore, TaskWatch};

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
                woke = changes.next_or_at(expires_at(&last)) => woke,
            };
            let now = match woke {
                Wake::Closed => return,
                // The event's task is the task now, seen by this scope: the
                // feed is keyed by tenant and the session never changes.
                Wake::News(News::Task(changed)) if in_scope(&scope, &changed.task) => {
                    Ok(changed.task.clone())
                }
                Wake::News(News::Finished(ended)) if in_scope(&scope, &ended.task) => {
                    Ok(ended.task.clone())
                }
                // A watcher shows every change (message, progress), so any
                // other wake means a read.
                Wake::News(_) | Wake::ReadAgain => store.get_task(&scope, &task_id).await,
            };
            match now {
                Ok(task) if task == last => {}
                Ok(task) => {
                    let terminal = task.status.is_terminal();
                    last = task.clone();
                    if sender.send(Ok(task)).await.is_err() || terminal {
                        return;
                    }
                }
                // Gone (expired, deleted): say so and end.
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

/// When an open task expires (`None`: never).
fn expires_at(task: &Task) -> Option<chrono::DateTime<chrono::Utc>> {
    let ttl = chrono::TimeDelta::from_std(task.ttl?.as_duration()).ok()?;
    task.created_at.checked_add_signed(ttl)
}

/// Whether `scope` sees `task` (its session, when the scope names one).
pub(super) fn in_scope(scope: &Scope, task: &Task) -> bool {
    scope
        .session
        .as_ref()
        .is_none_or(|session| task.session_id.as_ref() == Some(session))
}

/// Waits (up to `timeout`) until the task is terminal; then, or at the
/// timeout, returns what [`TaskStore::get_result`] says.
pub async fn wait_for_result<S>(
    store: &S,
    feed: &ChangeFeed,
    scope: &Scope,
    task_id: &TaskId,
    timeout: Duration,
) -> Result<TaskResult, StoreError>
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
        // Handed over by this process as it stored it: the answer itself.
        if let Wake::News(News::Finished(ended)) = &woke
            && in_scope(scope, &ended.task)
        {
            return Ok(TaskResult::clone(ended));
        }
        let status = match &woke {
            Wake::News(News::Task(changed)) => Some(changed.task.status),
            Wake::News(News::Finished(ended)) => Some(ended.task.status),
            Wake::News(News::Status(status)) => Some(*status),
            Wake::News(News::Unknown) | Wake::ReadAgain | Wake::Closed => None,
        };
        match (woke, status) {
            (Wake::Closed, _) => break,
            // Finished: the result read below is the only read needed.
            (_, Some(status)) if status.is_terminal() => break,
            // Progress on a running task: nothing to read yet.
            (_, Some(_)) => read = false,
            (_, None) => read = true,
        }
    }
    store.get_result(scope, task_id).await
}
