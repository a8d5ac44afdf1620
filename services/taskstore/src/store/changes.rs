//! The change feed: every replica learns which task changed, whichever
//! replica changed it, so watches and blocking reads wake without polling.
//! Backends feed a [`ChangeFeed`]; [`watch`] and [`wait_for_result`] build
//! the trait's watch and blocking-read behaviour on it, once for all.

use std::time::Duration;

use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::mpsc;
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

impl TaskChange {
    /// Whether a watcher of (`tenant`, `task_id`) should read its task again.
    pub fn concerns(&self, tenant: &str, task_id: &str) -> bool {
        match self {
            TaskChange::Changed {
                tenant: t,
                task_id: id,
                ..
            } => t == tenant && id == task_id,
            TaskChange::Resync => true,
        }
    }
}

/// The sending side, shared by a backend's writers or listener.
#[derive(Debug, Clone)]
pub struct ChangeFeed {
    sender: broadcast::Sender<TaskChange>,
}

impl Default for ChangeFeed {
    fn default() -> Self {
        // A slow watcher that falls this far behind gets `Lagged` and simply
        // re-reads its task: nothing is lost but time.
        let (sender, _) = broadcast::channel(4096);
        Self { sender }
    }
}

impl ChangeFeed {
    pub fn publish(&self, change: TaskChange) {
        // No subscribers is fine: nobody is waiting.
        let _ = self.sender.send(change);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<TaskChange> {
        self.sender.subscribe()
    }
}

/// Why a waiter woke.
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

/// Waits until the next event that concerns the task (or the periodic
/// re-check).
async fn next_concerning(
    changes: &mut broadcast::Receiver<TaskChange>,
    scope: &Scope,
    task_id: &TaskId,
) -> Wake {
    let recheck = tokio::time::sleep(RECHECK_EVERY);
    tokio::pin!(recheck);
    loop {
        tokio::select! {
            () = &mut recheck => return Wake::ReadAgain,
            event = changes.recv() => match event {
                Ok(change) if change.concerns(scope.tenant.as_str(), task_id.as_str()) => {
                    return match change {
                        TaskChange::Changed { status: Some(status), .. } => Wake::Now(status),
                        _ => Wake::ReadAgain,
                    };
                }
                Ok(_) => {}
                Err(RecvError::Lagged(_)) => return Wake::ReadAgain,
                Err(RecvError::Closed) => return Wake::Closed,
            },
        }
    }
}

/// [`TaskStore::watch_task`] over a change feed. Subscribes before the first
/// read, so no change between the two is missed.
pub async fn watch<S>(
    store: S,
    mut changes: broadcast::Receiver<TaskChange>,
    scope: Scope,
    task_id: TaskId,
) -> Result<TaskWatch, StoreError>
where
    S: TaskStore + Clone,
{
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
                woke = next_concerning(&mut changes, &scope, &task_id) => woke,
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
    mut changes: broadcast::Receiver<TaskChange>,
    scope: &Scope,
    task_id: &TaskId,
    timeout: Duration,
) -> Result<crate::domain::TaskResult, StoreError>
where
    S: TaskStore + ?Sized,
{
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
            woke = next_concerning(&mut changes, scope, task_id) => woke,
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
