//! The in-memory backend: for tests and throwaway runs. Everything is lost
//! when the process ends. It honours the same contract as PostgreSQL
//! (proved by the same conformance suite): one lock makes every operation
//! atomic, so quotas and races behave exactly. Expired tasks are invisible
//! at once; a timer sweeps them away, and dropping the store stops it.

mod apply;
mod dispatch;
mod dispatch_view;
mod execution;
mod hold;
mod idempotent;
mod insights;
mod maintenance;
mod operations;
pub(crate) mod persist;
mod questions;
mod state;
mod task_store;

use std::sync::Arc;

use tokio::sync::{Mutex, MutexGuard, Notify};

use self::state::{Key, Record, State, key};
use super::changes::{ChangeFeed, ChangedTask, News, TaskChange};
use super::{StoreConfig, already_terminal};
use crate::domain::{CursorCodec, Fence, FenceRefusal, Scope, Task, TaskId, TaskStatus};
use crate::error::StoreError;

/// The in-memory [`TaskStore`] (cheap to clone: clones share the store).
#[derive(Debug, Clone)]
pub struct MemoryTaskStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Mutex<State>,
    /// Where every change is written through to (a SQLite file), if anywhere.
    persistence: Option<Arc<dyn persist::Persistence>>,
    config: StoreConfig,
    cursors: CursorCodec,
    changes: ChangeFeed,
    outbox: Arc<Notify>,
    workers: operations::Registry,
    /// The tenants' turns per tool (`domain::next_jobs`).
    gate: super::dispatch_gate::DispatchGate,
}

impl MemoryTaskStore {
    /// A store kept in `persistence` (a SQLite file): loads what is stored,
    /// then writes every change through before answering.
    pub async fn open_persistent(
        config: StoreConfig,
        persistence: Arc<dyn persist::Persistence>,
    ) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let (records, jobs) = persistence.load().await?;
        let loaded = persist::Loaded::from_stored(records, jobs)?;
        let mut state = State::default();
        loaded.install(&mut state);
        let cursors = CursorCodec::new(persistence.cursor_key().await?);
        Ok(Self::assemble(config, cursors, state, Some(persistence)))
    }

    fn assemble(
        config: StoreConfig,
        cursors: CursorCodec,
        state: State,
        persistence: Option<Arc<dyn persist::Persistence>>,
    ) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(state),
            persistence,
            config,
            cursors,
            changes: ChangeFeed::default(),
            outbox: Arc::new(Notify::new()),
            workers: operations::Registry::default(),
            gate: Default::default(),
        });
        Self { inner }
    }

    /// A new, empty store. (Expired tasks are swept by the service's
    /// sweeper, as for every backend.)
    pub fn new(config: StoreConfig) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let cursors = CursorCodec::random().map_err(|err| {
            tracing::error!(error = %err, "no randomness for the cursor key");
            StoreError::Internal("could not generate the cursor key".into())
        })?;
        Ok(Self::assemble(config, cursors, State::default(), None))
    }

    /// One operation at a time: the lock makes each operation atomic, like
    /// one SQL statement. (An async lock: writing through to a file happens
    /// while it is held.)
    async fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().await
    }

    /// Ends a mutating operation: what it changed is written through to the
    /// persistence layer, if any, before the caller sees the outcome.
    async fn commit(&self, state: &mut State) -> Result<(), StoreError> {
        let tasks = std::mem::take(&mut state.dirty_tasks);
        let jobs = std::mem::take(&mut state.dirty_jobs);
        let Some(persistence) = &self.inner.persistence else {
            return Ok(());
        };
        let task_writes = tasks.into_iter().map(|key| {
            let record = state
                .tasks
                .get(&key)
                .map(|record| persist::stored(&key, record));
            (key, record)
        });
        let job_writes = jobs.into_iter().map(|id| {
            let job = state
                .outbox
                .iter()
                .find(|job| job.id == id)
                .map(persist::StoredJob::from);
            (id, job)
        });
        let written = persistence
            .write(task_writes.collect(), job_writes.collect())
            .await;
        if let Err(err) = written {
            // The file is the truth: forget what could not be written.
            tracing::error!(error = %err, "write-through failed; reloading the store from its file");
            let reloaded = persistence
                .load()
                .await
                .and_then(|(records, jobs)| persist::Loaded::from_stored(records, jobs));
            match reloaded {
                Ok(loaded) => loaded.install(state),
                Err(reload) => tracing::error!(error = %reload, "reloading the store failed"),
            }
            return Err(err);
        }
        Ok(())
    }

    fn config(&self) -> &StoreConfig {
        &self.inner.config
    }

    /// Tells watchers, waiters and followers that the task changed, with
    /// the task as it is now (none: it is gone). Called with the state still
    /// locked, so that changes are told in the order they were made.
    fn changed(&self, state: &State, key: &Key) {
        let news = match state.tasks.get(key) {
            Some(record) => News::Task(Arc::new(ChangedTask {
                task: record.task.clone(),
                progress_token: record.progress_token.clone(),
            })),
            None => News::Unknown,
        };
        self.inner.changes.publish(TaskChange::Changed {
            tenant: key.0.clone(),
            task_id: key.1.clone(),
            news,
        });
    }

    /// Wakes the relay when jobs are due: a slot or a queue's room may have
    /// come free for them.
    fn wake_relay_if_jobs_wait(&self, state: &State, now: chrono::DateTime<chrono::Utc>) {
        if state
            .outbox
            .iter()
            .any(|job| !job.in_flight && job.available_at <= now)
        {
            self.inner.outbox.notify_one();
        }
    }

    async fn transition(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        status: TaskStatus,
        message: Option<String>,
        result: Option<crate::domain::JsonObject>,
        fence: Fence<'_>,
    ) -> Result<Task, StoreError> {
        let key = key(scope.tenant.as_str(), task_id);
        let task = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = visible(&mut state, scope, &key, now)?;
            if record.task.status.is_terminal() {
                return Err(already_terminal(record.task.status));
            }
            // A held task carries dispatch bookkeeping, as a dispatched one.
            let current = record.lease().map(|l| &l.token);
            if !fence.admits(record.dispatch.is_some(), current) {
                return Err(FenceRefusal::explain_for(record.task.status, &fence).into());
            }
            apply::apply(
                &mut state,
                &key,
                &crate::domain::Effects::of_report(status, message, result),
                now,
            );
            let task = visible(&mut state, scope, &key, now)?.task.clone();
            self.commit(&mut state).await?;
            self.changed(&state, &key);
            // A task that ended gave back its key's slot, if it held one.
            self.wake_relay_if_jobs_wait(&state, now);
            task
        };
        crate::metrics::task_finished(task.status);
        Ok(task)
    }
}

/// The visible, live record for `key` in `scope`, or NOT_FOUND.
fn visible<'a>(
    state: &'a mut State,
    scope: &Scope,
    key: &Key,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<&'a mut Record, StoreError> {
    state
        .tasks
        .get_mut(key)
        .filter(|record| record.is_live(now) && in_session(scope, record))
        .ok_or(StoreError::NotFound)
}

fn in_session(scope: &Scope, record: &Record) -> bool {
    scope.session.is_none() || scope.session == record.task.session_id
}

/// The live record for `key` whose attempt holds `lease`, or the refusal a
/// report on it gets (NOT_FOUND, or FAILED_PRECONDITION saying why).
fn held_record<'a>(
    state: &'a mut State,
    key: &Key,
    lease: &crate::domain::LeaseToken,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<&'a mut Record, StoreError> {
    let record = state
        .tasks
        .get_mut(key)
        .filter(|r| r.is_live(now))
        .ok_or(StoreError::NotFound)?;
    let ours = record.lease().is_some_and(|l| &l.token == lease);
    if record.task.status.is_terminal() || !ours {
        return Err(crate::domain::FenceRefusal::explain(record.task.status).into());
    }
    Ok(record)
}
