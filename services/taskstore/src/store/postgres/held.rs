//! Locking a task for the attempt that holds it: the one way a worker's
//! fenced write (a release, a question) starts, and the one place that
//! says why it was refused when the lease is not the task's any more.

use sqlx::postgres::PgRow;
use sqlx::{FromRow, Postgres, Transaction};

use super::PgTaskStore;
use super::error::store_error;
use crate::domain::{FenceRefusal, LeaseToken, TaskId, TaskStatus, TenantId};
use crate::error::StoreError;
use crate::store::statements::sql;

impl PgTaskStore {
    /// Begins a transaction and reads, with `sql` (`lock_held_task!` of
    /// the columns of `R`), the task the attempt holding `lease` runs. When no
    /// such attempt holds it, the refusal says why, from the task as it is
    /// now: NOT_FOUND, or the domain's [`FenceRefusal`].
    pub(super) async fn lock_held<R>(
        &self,
        sql: &'static str,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
    ) -> Result<(Transaction<'static, Postgres>, R), StoreError>
    where
        R: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let mut tx = self.begin().await?;
        let held = sqlx::query_as::<_, R>(sql)
            .bind(tenant.as_str())
            .bind(task_id.as_str())
            .bind(lease.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
        match held {
            Some(held) => Ok((tx, held)),
            None => {
                // Nothing is locked: the connection goes back first.
                drop(tx);
                Err(self.fence_refusal(tenant, task_id).await)
            }
        }
    }

    /// Why a fenced write was refused, from the task as it is now.
    async fn fence_refusal(&self, tenant: &TenantId, task_id: &TaskId) -> StoreError {
        let status: Result<Option<String>, StoreError> = sqlx::query_scalar(sql!(concat!(
            "SELECT status FROM tasks WHERE ",
            live_task!()
        )))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(store_error);
        match status {
            Ok(Some(status)) => match status.parse::<TaskStatus>() {
                Ok(status) => FenceRefusal::explain(status).into(),
                Err(_) => StoreError::Internal("corrupt task row".into()),
            },
            Ok(None) => StoreError::NotFound,
            Err(err) => err,
        }
    }
}
