//! [`TaskStore`] on PostgreSQL: each operation one statement (or one
//! short transaction), its rules shared with every backend (`store/mod.rs`,
//! `domain/`).

use std::time::Duration;

use async_trait::async_trait;

use super::PgTaskStore;
use super::error::store_error;
use super::read_batch::Read;
use super::rows::{TaskWithResultRow, stored_json, task_columns};
use crate::domain::{
    Effects, Fence, NewResult, NewTask, PageRequest, Scope, StatusUpdate, Task, TaskId, TaskPage,
    TaskResult, TaskStatus,
};
use crate::error::StoreError;
use crate::store::changes::{follow, wait_for_result, watch};
use crate::store::statements::sql;
use crate::store::{TaskStore, TaskWatch, no_result};

#[async_trait]
impl TaskStore for PgTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let dispatched = task.dispatch.is_some();
        let (row, created) = self.insert(scope, task).await?;
        let task = row.into_task()?;
        if !created {
            crate::metrics::idempotent_replay();
            return Ok(task);
        }
        // A dispatched task's job is now with this replica's relay, which
        // was woken for it (`handoff`); the others only poll (migration 0008).
        crate::metrics::task_created(dispatched);
        Ok(task)
    }

    async fn get_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        self.reads.read(Read::of(scope, task_id)).await?.into_task()
    }

    async fn update_status(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        update: StatusUpdate,
    ) -> Result<Task, StoreError> {
        // A worker's progress report: WORKING under its lease.
        let progress_under = update
            .lease
            .as_ref()
            .filter(|_| update.status == TaskStatus::Working);
        if let Some(lease) = progress_under
            && let Some(told) = self
                .tell_progress(scope, task_id, lease, update.message.clone())
                .await?
        {
            return told.into_task();
        }
        match self
            .transition(
                scope,
                task_id,
                Effects::of_report(update.status, update.message.clone(), None),
                Fence::of_report(update.lease.as_ref()),
            )
            .await?
        {
            Some(row) => {
                if progress_under.is_some() {
                    self.progress_written(scope, task_id);
                }
                row.into_task()
            }
            None => {
                let fence = Fence::of_report(update.lease.as_ref());
                Err(self.refusal(scope, task_id, fence).await)
            }
        }
    }

    async fn store_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        result: NewResult,
    ) -> Result<Task, StoreError> {
        let status = TaskStatus::from(result.status);
        match self
            .transition(
                scope,
                task_id,
                Effects::of_report(status, result.message.clone(), Some(result.result.clone())),
                Fence::of_report(result.lease.as_ref()),
            )
            .await?
        {
            Some(row) => {
                let task = row.into_task()?;
                // Callers waiting here for it need not read it back.
                self.changes.hand_over(
                    scope.tenant.as_str(),
                    task_id.as_str(),
                    TaskResult {
                        task: task.clone(),
                        result: result.result,
                    },
                );
                Ok(task)
            }
            None => {
                let fence = Fence::of_report(result.lease.as_ref());
                Err(self.refusal(scope, task_id, fence).await)
            }
        }
    }

    async fn get_result(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskResult, StoreError> {
        const SQL: &str = select_visible!(", result_json");
        let row: TaskWithResultRow = self.fetch_visible_as(sql!(SQL), scope, task_id).await?;
        let task = row.task.into_task()?;
        match (task.status, row.result_json) {
            (TaskStatus::Completed | TaskStatus::Failed, Some(result)) => Ok(TaskResult {
                task,
                result: stored_json(result)?,
            }),
            (status, _) => Err(no_result(status)),
        }
    }

    async fn list_tasks(&self, scope: &Scope, page: PageRequest) -> Result<TaskPage, StoreError> {
        self.page(scope, page).await
    }

    async fn cancel_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        match self
            .transition(
                scope,
                task_id,
                Effects::of_report(TaskStatus::Cancelled, None, None),
                Fence::Overrides,
            )
            .await?
        {
            Some(row) => {
                self.fresh.discard(scope.tenant.as_str(), task_id.as_str());
                row.into_task()
            }
            // Idempotent: a terminal task comes back as it is.
            None => self.fetch_visible(scope, task_id).await?.into_task(),
        }
    }

    async fn watch_task(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskWatch, StoreError> {
        self.listeners.ensure(scope.tenant.as_str()).await?;
        watch(self.clone(), &self.changes, scope.clone(), task_id.clone()).await
    }

    async fn hold_task(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &crate::domain::Holder,
        renewing: Option<&crate::domain::LeaseToken>,
    ) -> Result<crate::domain::HoldOutcome, StoreError> {
        self.hold(scope, task_id, holder, renewing).await
    }

    async fn follow_tasks(&self, scope: &Scope) -> Result<crate::store::TaskFollow, StoreError> {
        self.listeners.ensure(scope.tenant.as_str()).await?;
        Ok(follow(self.clone(), &self.changes, scope.clone()))
    }

    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError> {
        self.listeners.ensure(scope.tenant.as_str()).await?;
        wait_for_result(self, &self.changes, scope, task_id, timeout).await
    }

    async fn delete_task(&self, scope: &Scope, task_id: &TaskId) -> Result<(), StoreError> {
        // One statement: the task, its waiting jobs, and the notification
        // that wakes its watchers (the change trigger fires on updates only).
        const SQL: &str = concat!(
            "WITH gone AS (DELETE FROM tasks WHERE ",
            visible_task!(),
            " RETURNING tenant_id, task_id),
             jobs AS (DELETE FROM dispatch_outbox o USING gone g
                      WHERE o.tenant_id = g.tenant_id AND o.task_id = g.task_id)
             SELECT 1 FROM gone CROSS JOIN LATERAL
                 pg_notify('taskstore_task_changed', gone.tenant_id || ' ' || gone.task_id) AS n"
        );
        let deleted = sqlx::query(sql!(SQL))
            .bind(scope.tenant.as_str())
            .bind(task_id.as_str())
            .bind(scope.session.as_ref().map(|s| s.as_str()))
            .fetch_optional(&self.pool)
            .await
            .map_err(store_error)?;
        deleted.ok_or(StoreError::NotFound)?;
        self.fresh.discard(scope.tenant.as_str(), task_id.as_str());
        Ok(())
    }

    async fn cleanup_expired(&self) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let deleted = self.delete_expired_batch().await?;
            total += deleted;
            if deleted < u64::from(self.config.cleanup_batch_size) {
                return Ok(total);
            }
        }
    }
}
