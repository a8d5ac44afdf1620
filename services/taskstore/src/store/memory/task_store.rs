//! [`TaskStore`] in memory: each operation under the one lock, its rules
//! shared with every backend (`store/mod.rs`, `domain/`).

use std::time::Duration;

use async_trait::async_trait;

use super::state::{Dispatch, Record, delta, key};
use super::{MemoryTaskStore, in_session, visible};
use crate::domain::{
    CursorPosition, Fence, LeaseToken, NewResult, NewTask, PageRequest, ProgressToken, Scope,
    StatusUpdate, Task, TaskId, TaskPage, TaskResult, TaskStatus, starts_at_message,
};
use crate::error::StoreError;
use crate::store::changes::{follow, wait_for_result, watch};
use crate::store::{TaskStore, TaskWatch, no_result, quota_reached};

#[async_trait]
impl TaskStore for MemoryTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let task_id = crate::store::task_id_or_new(task.task_id.clone())?;
        let tool = task.tool();
        let config = self.config();
        let (max_attempts, priority) = match &task.dispatch {
            Some(dispatch) => (
                config.dispatch_attempts(dispatch)?,
                config.dispatch_priority(&scope.tenant, dispatch)?,
            ),
            None => (0, Default::default()),
        };
        let limits = config.dispatch_limits(scope, &task);
        let key = key(scope.tenant.as_str(), &task_id);
        let created = {
            let mut state = self.lock().await;
            // A replay answers before the quotas: it creates nothing.
            if let Some(idempotency_key) = &task.idempotency_key
                && let Some(existing) = super::idempotent::replayed(
                    &mut state,
                    scope,
                    idempotency_key,
                    &task.request,
                    config.idempotency_retention,
                )?
            {
                crate::metrics::idempotent_replay();
                return Ok(existing);
            }
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
            let starts_at = crate::store::start_of(task.dispatch.as_ref(), now, ttl)?;
            let dispatch = task.dispatch.map(|d| Dispatch {
                limit: limits.concurrency,
                rate: limits.rate,
                fairness: limits.fairness,
                slot: None,
                tool: d.tool,
                max_attempts,
                attempt: 0,
                generation: previous_generation + 1,
                lease: None,
                parked: false,
                retry: d.retry,
                priority,
            });
            let record = Record {
                progress_token: ProgressToken::of_request(&task.request),
                task: Task {
                    task_id,
                    status: TaskStatus::Working,
                    status_message: starts_at.map(starts_at_message),
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
                idempotency_key: task.idempotency_key,
            };
            if let Some(dispatch) = &record.dispatch {
                let (generation, tool) = (dispatch.generation, dispatch.tool.clone());
                state.enqueue(key.clone(), generation, &tool, starts_at.unwrap_or(now));
            }
            let created = record.task.clone();
            state.tasks.insert(key.clone(), record);
            state.touch(&key);
            self.commit(&mut state).await?;
            if starts_at.is_some() {
                crate::metrics::task_scheduled();
            }
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
            Fence::of_report(update.lease.as_ref()),
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
            Fence::of_report(result.lease.as_ref()),
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
            .transition(
                scope,
                task_id,
                TaskStatus::Cancelled,
                None,
                None,
                Fence::Overrides,
            )
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

    async fn follow_tasks(&self, scope: &Scope) -> Result<crate::store::TaskFollow, StoreError> {
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
}
