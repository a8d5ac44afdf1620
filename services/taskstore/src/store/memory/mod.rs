//! The in-memory backend: for tests and throwaway runs. Everything is lost
//! when the process ends. It honours the same contract as PostgreSQL
//! (proved by the same conformance suite): one lock makes every operation
//! atomic, so quotas and races behave exactly. Expired tasks are invisible
//! at once; a timer sweeps them away, and dropping the store stops it.

mod dispatch;
mod execution;
mod hold;
mod insights;
mod maintenance;
mod operations;
pub(crate) mod persist;
mod questions;
mod state;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Mutex, MutexGuard, Notify};

use self::state::{Dispatch, Key, Record, State, delta, key};
use super::changes::{ChangeFeed, ChangedTask, News, TaskChange, follow, wait_for_result, watch};
use super::{StoreConfig, TaskStore, TaskWatch, already_terminal, no_result, quota_reached};
use crate::domain::{
    Answered, Answers, CursorCodec, CursorPosition, LeaseToken, NewResult, NewTask, PageRequest,
    ProgressToken, Question, Scope, StatusUpdate, Task, TaskId, TaskPage, TaskResult, TaskStatus,
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
    workers: operations::Registry,
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
                    return Err(crate::domain::FenceRefusal::LeaseLost.into());
                }
            }
            record.transition(status, message, now);
            if result.is_some() {
                record.result = result;
            }
            let task = record.task.clone();
            state.touch(&key);
            self.commit(&mut state).await?;
            self.changed(&state, &key);
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

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let task_id = super::task_id_or_new(task.task_id.clone())?;
        let tool = task.tool();
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
            let quotas = config.quotas_for(&scope.tenant);
            if let Some(max) = quotas.max_tasks {
                let count = state
                    .tasks
                    .iter()
                    .filter(|(k, r)| k.0 == key.0 && live(r))
                    .count();
                if count as u64 >= max {
                    return Err(quota_reached("max_tasks", max));
                }
            }
            if let (Some(max), Some(session)) = (quotas.max_tasks_per_session, &scope.session) {
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
                parked: false,
            });
            let record = Record {
                progress_token: ProgressToken::of_request(&task.request),
                task: Task {
                    task_id,
                    status: TaskStatus::Working,
                    status_message: None,
                    created_at: now,
                    last_updated_at: now,
                    ttl,
                    poll_interval: config.poll.granted(task.poll_interval),
                    session_id: scope.session.clone(),
                    tool,
                },
                expires_at: ttl.map(|ttl| now + delta(ttl.as_duration())),
                request_id: task.request_id,
                request: task.request,
                result: None,
                dispatch,
                trace_context: task.trace_context.map(|t| t.as_str().to_owned()),
                questions: Vec::new(),
                attempts: Default::default(),
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
        crate::metrics::task_created(max_attempts > 0);
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
            .map(|c| self.inner.cursors.decode(scope, &page.filter, c))
            .transpose()?;
        let size = self.config().paging.resolve(page.page_size) as usize;
        let mut tasks: Vec<Task> = {
            let mut state = self.lock().await;
            let now = state.now();
            state
                .tasks
                .iter()
                .filter(|(k, r)| {
                    k.0 == scope.tenant.as_str()
                        && r.is_live(now)
                        && in_session(scope, r)
                        && page.filter.matches(&r.task)
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
                &page.filter,
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

    async fn delete_task(&self, scope: &Scope, task_id: &TaskId) -> Result<(), StoreError> {
        self.delete_visible(scope, task_id).await
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

    async fn hold_task(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &crate::domain::Holder,
        renewing: Option<&LeaseToken>,
    ) -> Result<crate::domain::HoldOutcome, StoreError> {
        self.hold(scope, task_id, holder, renewing).await
    }

    async fn follow_tasks(&self, scope: &Scope) -> Result<super::TaskFollow, StoreError> {
        Ok(follow(self.clone(), &self.inner.changes, scope.clone()))
    }

    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError> {
        wait_for_result(self, &self.inner.changes, scope, task_id, timeout).await
    }

    async fn input_requests(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        self.list_questions(scope, task_id).await
    }

    async fn answer_input_requests(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError> {
        self.answer_questions(scope, task_id, answers).await
    }
}
