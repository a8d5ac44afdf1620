//! The in-memory backend: for tests and throwaway runs. Everything is lost
//! when the process ends. It honours the same contract as PostgreSQL
//! (proved by the same conformance suite): one lock makes every operation
//! atomic, so quotas and races behave exactly. Expired tasks are invisible
//! at once; a timer sweeps them away, and dropping the store stops it.

mod execution;
pub(crate) mod persist;
mod state;

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, MutexGuard, Notify};

use self::state::{Dispatch, Key, Record, State, delta, key};
use super::changes::{ChangeFeed, TaskChange, wait_for_result, watch};
use super::execution::messages::lease_lost;
use super::{StoreConfig, TaskStore, TaskWatch, already_terminal, no_result, quota_reached};
use crate::domain::{
    CursorCodec, CursorPosition, LeaseToken, NewResult, NewTask, PageRequest, Scope, StatusUpdate,
    Task, TaskId, TaskPage, TaskResult, TaskStatus,
};
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
}

impl MemoryTaskStore {
    /// A store kept in `persistence` (a SQLite file): loads what is stored,
    /// then writes every change through before answering.
    pub async fn open_persistent(
        config: StoreConfig,
        persistence: Arc<dyn persist::Persistence>,
        cleanup_interval: Option<Duration>,
    ) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let (records, jobs) = persistence.load().await?;
        let loaded = persist::Loaded::from_stored(records, jobs)?;
        let mut state = State::default();
        loaded.install(&mut state);
        let cursors = CursorCodec::new(persistence.cursor_key().await?);
        Ok(Self::assemble(
            config,
            cursors,
            state,
            Some(persistence),
            cleanup_interval,
        ))
    }

    fn assemble(
        config: StoreConfig,
        cursors: CursorCodec,
        state: State,
        persistence: Option<Arc<dyn persist::Persistence>>,
        cleanup_interval: Option<Duration>,
    ) -> Self {
        let inner = Arc::new(Inner {
            state: Mutex::new(state),
            persistence,
            config,
            cursors,
            changes: ChangeFeed::default(),
            outbox: Arc::new(Notify::new()),
        });
        if let Some(interval) = cleanup_interval {
            spawn_sweep(Arc::downgrade(&inner), interval);
        }
        Self { inner }
    }

    /// A new, empty store. With a `cleanup_interval`, expired tasks are
    /// swept on that timer (inside a tokio runtime) until the store is
    /// dropped.
    pub fn new(
        config: StoreConfig,
        cleanup_interval: Option<Duration>,
    ) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let cursors = CursorCodec::random().map_err(|err| {
            tracing::error!(error = %err, "no randomness for the cursor key");
            StoreError::Internal("could not generate the cursor key".into())
        })?;
        Ok(Self::assemble(
            config,
            cursors,
            State::default(),
            None,
            cleanup_interval,
        ))
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

    /// Tells watchers and waiters that the task changed; `status` is its
    /// new status when the caller has it at hand (saves them a read).
    fn changed(&self, key: &Key, status: Option<TaskStatus>) {
        self.inner.changes.publish(TaskChange::Changed {
            tenant: key.0.clone(),
            task_id: key.1.clone(),
            status,
        });
    }

    async fn transition(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        status: TaskStatus,
        message: Option<String>,
        result: Option<crate::domain::JsonObject>,
        fence: Option<&LeaseToken>,
    ) -> Result<Task, StoreError> {
        let key = key(scope.tenant.as_str(), task_id);
        let task = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = visible(&mut state, scope, &key, now)?;
            if record.task.status.is_terminal() {
                return Err(already_terminal(record.task.status));
            }
            if let Some(fence) = fence {
                let current = record
                    .dispatch
                    .as_ref()
                    .and_then(|d| d.lease.as_ref())
                    .map(|l| &l.token);
                if current != Some(fence) {
                    return Err(lease_lost());
                }
            }
            record.transition(status, message, now);
            if result.is_some() {
                record.result = result;
            }
            let task = record.task.clone();
            state.touch(&key);
            self.commit(&mut state).await?;
            task
        };
        self.changed(&key, Some(task.status));
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

/// The timer holds only a weak reference: when the store's last clone goes
/// away, the next tick finds nothing and the timer ends.
fn spawn_sweep(inner: Weak<Inner>, interval: Duration) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("no async runtime: the in-memory store will not sweep expired tasks");
        return;
    };
    runtime.spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            let Some(inner) = inner.upgrade() else { return };
            match (MemoryTaskStore { inner }).delete_expired().await {
                Ok(0) => {}
                Ok(deleted) => tracing::info!(deleted, "expired tasks deleted"),
                Err(err) => tracing::warn!(error = %err, "expired task sweep failed"),
            }
        }
    });
}

impl MemoryTaskStore {
    /// After a restart: a dispatched task that waits for a worker but has no
    /// job (its job went to an in-process queue that died with the process)
    /// gets one again, at its current generation. A duplicate of a job that
    /// still exists elsewhere is harmless: only one claim succeeds.
    pub async fn requeue_unqueued_jobs(&self) -> Result<u64, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let orphans: Vec<(Key, u64, crate::domain::ToolName)> = state
            .tasks
            .iter()
            .filter(|(_, r)| r.is_live(now) && !r.task.status.is_terminal())
            .filter_map(|(key, r)| {
                let d = r.dispatch.as_ref().filter(|d| d.lease.is_none())?;
                let queued = state
                    .outbox
                    .iter()
                    .any(|j| &j.key == key && j.generation == d.generation);
                (!queued).then(|| (key.clone(), d.generation, d.tool.clone()))
            })
            .collect();
        for (key, generation, tool) in &orphans {
            state.enqueue(key.clone(), *generation, tool, now);
        }
        self.commit(&mut state).await?;
        if !orphans.is_empty() {
            tracing::info!(
                count = orphans.len(),
                "waiting tasks given their jobs again after a restart"
            );
            self.inner.outbox.notify_one();
        }
        Ok(orphans.len() as u64)
    }

    async fn delete_expired(&self) -> Result<u64, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let expired: Vec<Key> = state
            .tasks
            .iter()
            .filter(|(_, record)| !record.is_live(now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &expired {
            state.tasks.remove(key);
            state.touch(key);
        }
        let State { tasks, .. } = &*state;
        let gone: std::collections::HashSet<Key> = state
            .outbox
            .iter()
            .filter(|job| !tasks.contains_key(&job.key))
            .map(|job| job.key.clone())
            .collect();
        state.remove_jobs(|job| gone.contains(&job.key));
        self.commit(&mut state).await?;
        Ok(expired.len() as u64)
    }
}

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let task_id = super::task_id_or_new(task.task_id)?;
        let config = self.config();
        let max_attempts = match &task.dispatch {
            Some(dispatch) => config.dispatch_attempts(dispatch.max_attempts)?,
            None => 0,
        };
        let key = key(scope.tenant.as_str(), &task_id);
        let created = {
            let mut state = self.lock().await;
            let now = state.now();
            let live = |record: &&Record| record.is_live(now);
            if let Some(max) = config.quotas.max_tasks {
                let count = state
                    .tasks
                    .iter()
                    .filter(|(k, r)| k.0 == key.0 && live(r))
                    .count();
                if count as u64 >= max {
                    return Err(quota_reached("max_tasks", max));
                }
            }
            if let (Some(max), Some(session)) =
                (config.quotas.max_tasks_per_session, &scope.session)
            {
                let count = state
                    .tasks
                    .iter()
                    .filter(|(k, r)| {
                        k.0 == key.0 && r.task.session_id.as_ref() == Some(session) && live(r)
                    })
                    .count();
                if count as u64 >= max {
                    return Err(quota_reached("max_tasks_per_session", max));
                }
            }
            // An expired task's id is free again; its generations continue so
            // that its stale jobs never claim the new task.
            let previous_generation = match state.tasks.get(&key) {
                Some(record) if record.is_live(now) => {
                    return Err(StoreError::AlreadyExists(task_id.to_string()));
                }
                Some(record) => record.dispatch.as_ref().map_or(0, |d| d.generation),
                None => 0,
            };
            let ttl = config.ttl.effective(task.ttl);
            let dispatch = task.dispatch.map(|d| Dispatch {
                tool: d.tool,
                max_attempts,
                attempt: 0,
                generation: previous_generation + 1,
                lease: None,
            });
            let record = Record {
                task: Task {
                    task_id,
                    status: TaskStatus::Working,
                    status_message: None,
                    created_at: now,
                    last_updated_at: now,
                    ttl,
                    poll_interval: config.poll_interval,
                    session_id: scope.session.clone(),
                },
                expires_at: ttl.map(|ttl| now + delta(ttl.as_duration())),
                request_id: task.request_id,
                request: task.request,
                result: None,
                dispatch,
            };
            if let Some(dispatch) = &record.dispatch {
                let (generation, tool) = (dispatch.generation, dispatch.tool.clone());
                state.enqueue(key.clone(), generation, &tool, now);
            }
            let created = record.task.clone();
            state.tasks.insert(key.clone(), record);
            state.touch(&key);
            self.commit(&mut state).await?;
            created
        };
        if max_attempts > 0 {
            self.inner.outbox.notify_one();
        }
        Ok(created)
    }

    async fn get_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        Ok(
            visible(&mut state, scope, &key(scope.tenant.as_str(), task_id), now)?
                .task
                .clone(),
        )
    }

    async fn update_status(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        update: StatusUpdate,
    ) -> Result<Task, StoreError> {
        self.transition(
            scope,
            task_id,
            update.status,
            update.message,
            None,
            update.lease.as_ref(),
        )
        .await
    }

    async fn store_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        result: NewResult,
    ) -> Result<Task, StoreError> {
        let status = TaskStatus::from(result.status);
        self.transition(
            scope,
            task_id,
            status,
            result.message,
            Some(result.result),
            result.lease.as_ref(),
        )
        .await
    }

    async fn get_result(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskResult, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let record = visible(&mut state, scope, &key(scope.tenant.as_str(), task_id), now)?;
        match (record.task.status, &record.result) {
            (TaskStatus::Completed | TaskStatus::Failed, Some(result)) => Ok(TaskResult {
                task: record.task.clone(),
                result: result.clone(),
            }),
            (status, _) => Err(no_result(status)),
        }
    }

    async fn list_tasks(&self, scope: &Scope, page: PageRequest) -> Result<TaskPage, StoreError> {
        let after = page
            .cursor
            .as_deref()
            .map(|c| self.inner.cursors.decode(scope, c))
            .transpose()?;
        let size = self.config().paging.resolve(page.page_size) as usize;
        let mut tasks: Vec<Task> = {
            let mut state = self.lock().await;
            let now = state.now();
            state
                .tasks
                .iter()
                .filter(|(k, r)| {
                    k.0 == scope.tenant.as_str() && r.is_live(now) && in_session(scope, r)
                })
                .map(|(_, r)| r.task.clone())
                .filter(|t| {
                    after
                        .as_ref()
                        .is_none_or(|a| (t.created_at, &t.task_id) > (a.created_at, &a.task_id))
                })
                .collect()
        };
        tasks.sort_by(|a, b| (a.created_at, &a.task_id).cmp(&(b.created_at, &b.task_id)));
        let has_more = tasks.len() > size;
        tasks.truncate(size);
        let next_cursor = match (has_more, tasks.last()) {
            (true, Some(last)) => Some(self.inner.cursors.encode(
                scope,
                &CursorPosition {
                    created_at: last.created_at,
                    task_id: last.task_id.clone(),
                },
            )),
            _ => None,
        };
        Ok(TaskPage { tasks, next_cursor })
    }

    async fn cancel_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        match self
            .transition(scope, task_id, TaskStatus::Cancelled, None, None, None)
            .await
        {
            // Idempotent: a terminal task comes back as it is.
            Err(StoreError::FailedPrecondition(_)) => self.get_task(scope, task_id).await,
            other => other,
        }
    }

    async fn cleanup_expired(&self) -> Result<u64, StoreError> {
        self.delete_expired().await
    }

    async fn watch_task(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskWatch, StoreError> {
        watch(
            self.clone(),
            &self.inner.changes,
            scope.clone(),
            task_id.clone(),
        )
        .await
    }

    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError> {
        wait_for_result(self, &self.inner.changes, scope, task_id, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dropping_the_store_stops_its_sweep_timer() {
        let store = MemoryTaskStore::new(StoreConfig::default(), Some(Duration::from_millis(10)))
            .expect("store");
        let weak = Arc::downgrade(&store.inner);
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(store);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(weak.upgrade().is_none(), "the timer keeps nothing alive");
    }
}
