//! CreateTask on PostgreSQL: the row (and the outbox job of a dispatched
//! task, handed to this replica's relay once committed) in one statement,
//! through the group-commit writer, or, when a quota applies, counted and
//! inserted under an advisory lock so the count and the insert cannot
//! interleave with another create's. A create carrying an idempotency key
//! takes its own path (`idempotent.rs`).

use sqlx::Postgres;

use super::PgTaskStore;
use super::advisory::lock_until_commit;
use super::error::store_error;
use super::group_commit;
use super::idempotent::KeyedOutcome;
use super::rows::{TaskRow, millis};
use crate::domain::{NewTask, ProgressToken, Scope, starts_at_message};
use crate::error::StoreError;
use crate::store::quota_reached;
use crate::store::statements::sql;

impl PgTaskStore {
    /// Inserts a task; ALREADY_EXISTS when a live task has its id. With an
    /// idempotency key, the task the key names may come back instead: the
    /// flag says whether the task was created now.
    pub(super) async fn insert(
        &self,
        scope: &Scope,
        task: NewTask,
    ) -> Result<(TaskRow, bool), StoreError> {
        let task_id = crate::store::task_id_or_new(task.task_id.clone())?;
        let ttl = self.config.ttl.effective(task.ttl);
        let ttl_ms = ttl.map(|ttl| ttl.as_millis_i64());
        // Checked after a keyed create's lookup: a client's retry gets its
        // task even when the start it asked for has passed meanwhile.
        let starts_at = crate::store::start_of(task.dispatch.as_ref(), chrono::Utc::now(), ttl);
        let poll = self.config.poll.granted(task.poll_interval);
        let poll_ms = i64::try_from(poll.as_millis()).unwrap_or(i64::MAX);
        let (attempts, priority) = match &task.dispatch {
            Some(dispatch) => {
                let attempts = self.config.dispatch_attempts(dispatch)?;
                let priority = self.config.dispatch_priority(&scope.tenant, dispatch)?;
                (
                    Some(i32::try_from(attempts).unwrap_or(i32::MAX)),
                    i16::from(priority.get()),
                )
            }
            None => (None, 0),
        };

        let limits = self.config.dispatch_limits(scope, &task);
        let new_row = group_commit::NewRow {
            tenant: scope.tenant.as_str().to_owned(),
            task_id: task_id.as_str().to_owned(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
            request_id_json: task.request_id.as_str().to_owned(),
            request_json: task.request.as_str().to_owned(),
            ttl_ms,
            poll_ms,
            tool: task.tool().map(|tool| tool.as_str().to_owned()),
            max_attempts: attempts,
            trace_context: task.trace_context.as_ref().map(|t| t.as_str().to_owned()),
            progress_token: ProgressToken::of_request(&task.request)
                .map(|token| token.as_str().to_owned()),
            idempotency_key: task.idempotency_key.as_ref().map(|k| k.as_str().to_owned()),
            starts_at: None,
            status_message: None,
            priority,
            retry_policy: task
                .dispatch
                .as_ref()
                .and_then(|dispatch| dispatch.retry.to_stored()),
            limit: limits
                .concurrency
                .map(|limit| (limit.key, i32::try_from(limit.max).unwrap_or(i32::MAX))),
            rate: limits.rate.map(|rate| {
                (
                    rate.key,
                    i32::try_from(rate.starts).unwrap_or(i32::MAX),
                    millis(rate.per),
                )
            }),
            fairness: limits.fairness,
        };
        let new_row = starts_at.map(|starts_at| group_commit::NewRow {
            starts_at,
            status_message: starts_at.map(starts_at_message),
            ..new_row
        });
        let scheduled = matches!(
            new_row,
            Ok(group_commit::NewRow {
                starts_at: Some(_),
                ..
            })
        );
        let row = if let Some(key) = &task.idempotency_key {
            match self
                .insert_keyed(scope, key, &task.request, new_row)
                .await?
            {
                Some(KeyedOutcome::Replayed(row)) => return Ok((row, false)),
                Some(KeyedOutcome::Created(row)) => Some(row),
                None => None,
            }
        } else if self.quota_lock_key(scope).is_some() {
            // Creates under a quota are serialized (count, then insert), so
            // they cannot share a batch.
            let tx = self.begin().await?;
            self.insert_alone(tx, scope, new_row?).await?
        } else {
            super::batch_writer::submit(&self.creates, new_row?).await?
        };
        let row = row.ok_or_else(|| StoreError::AlreadyExists(task_id.to_string()))?;
        if scheduled {
            crate::metrics::task_scheduled();
        }
        Ok((row, true))
    }

    /// Inserts `row` in `tx`, counted against the tenant's quotas when it
    /// has any, and commits; the job goes to this replica's relay. `None`:
    /// a live task has its id.
    pub(super) async fn insert_alone(
        &self,
        mut tx: sqlx::Transaction<'static, Postgres>,
        scope: &Scope,
        row: group_commit::NewRow,
    ) -> Result<Option<TaskRow>, StoreError> {
        if let Some(lock_key) = self.quota_lock_key(scope) {
            self.enforce_quotas(&mut tx, scope, lock_key).await?;
        }
        let created = group_commit::insert_rows(&mut *tx, std::slice::from_ref(&row))
            .await
            .map_err(store_error)?;
        super::commit(tx).await?;
        self.fresh.push(created.jobs, created.to_decide);
        Ok(created.rows.into_values().next())
    }

    /// The advisory lock that serializes creates which count against the
    /// same quota, so the count and the insert cannot interleave with another
    /// create's (no check-then-insert race). The tenant lock covers both
    /// quotas; with only a session quota, sessions do not wait for each other.
    fn quota_lock_key(&self, scope: &Scope) -> Option<String> {
        let quotas = self.config.quotas_for(&scope.tenant);
        if quotas.max_tasks.is_some() {
            Some(format!("taskstore/quota/{}", scope.tenant.as_str()))
        } else if let (Some(_), Some(session)) = (quotas.max_tasks_per_session, &scope.session) {
            Some(format!(
                "taskstore/quota/{}/{}/{}",
                scope.tenant.as_str().len(),
                scope.tenant.as_str(),
                session.as_str()
            ))
        } else {
            None
        }
    }

    async fn enforce_quotas(
        &self,
        tx: &mut sqlx::Transaction<'_, Postgres>,
        scope: &Scope,
        lock_key: String,
    ) -> Result<(), StoreError> {
        lock_until_commit(tx, lock_key).await?;

        let quotas = self.config.quotas_for(&scope.tenant);
        if let Some(max) = quotas.max_tasks {
            let count: i64 = sqlx::query_scalar(sql!(concat!(
                "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND ",
                live!()
            )))
            .bind(scope.tenant.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(store_error)?;
            if count_reaches(count, max) {
                return Err(quota_reached("max_tasks", max));
            }
        }
        if let (Some(max), Some(session)) = (quotas.max_tasks_per_session, &scope.session) {
            let count: i64 = sqlx::query_scalar(sql!(concat!(
                "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND session_id = $2 AND ",
                live!()
            )))
            .bind(scope.tenant.as_str())
            .bind(session.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(store_error)?;
            if count_reaches(count, max) {
                return Err(quota_reached("max_tasks_per_session", max));
            }
        }
        Ok(())
    }
}

fn count_reaches(count: i64, max: u64) -> bool {
    u64::try_from(count).unwrap_or(0) >= max
}
