//! Idempotent creates on PostgreSQL: a create carrying a key takes an
//! advisory lock on (tenant, key), so that racing creates with one key run
//! one after another; the first inserts the task, the others find it and
//! answer with it. The unique index of migration 0017 backs the lock: no
//! interleaving can leave two tasks of a tenant holding one key.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::PgTaskStore;
use super::error::store_error;
use super::group_commit::NewRow;
use super::rows::{TaskRow, task_columns};
use crate::domain::{
    IdempotencyKey, JsonObject, KeyedCreate, KeyedTask, Replay, Scope, SessionId, replay,
};
use crate::error::{Refusal, StoreError};
use crate::store::statements::sql;

/// What a keyed create did.
pub(super) enum KeyedOutcome {
    /// It made the task.
    Created(TaskRow),
    /// The key already named this task, created by the same call.
    Replayed(TaskRow),
}

#[derive(sqlx::FromRow)]
struct KeyedRow {
    #[sqlx(flatten)]
    task: TaskRow,
    request_json: String,
    now: DateTime<Utc>,
}

impl PgTaskStore {
    /// Creates `row` unless `key` already names a task of the tenant. The
    /// row may be an error (a start time it may not have): a retry is
    /// answered with its task all the same; only a create is refused.
    pub(super) async fn insert_keyed(
        &self,
        scope: &Scope,
        key: &IdempotencyKey,
        request: &JsonObject,
        row: Result<NewRow, StoreError>,
    ) -> Result<Option<KeyedOutcome>, StoreError> {
        let mut tx = self.begin().await?;
        lock_key(&mut tx, scope, key).await?;
        if let Some(existing) = self.keyed_task(&mut tx, scope, key).await? {
            let stored = JsonObject::parse(existing.request_json.as_str())
                .map_err(|_| StoreError::Internal("corrupt stored request".into()))?;
            let session = existing
                .task
                .session_id()
                .map(|raw| SessionId::parse(raw, usize::MAX))
                .transpose()
                .map_err(|_| StoreError::Internal("corrupt stored session".into()))?;
            let decision = replay(
                KeyedTask {
                    created_at: existing.task.created_at(),
                    session: session.as_ref(),
                    request: &stored,
                },
                KeyedCreate {
                    session: scope.session.as_ref(),
                    request,
                    now: existing.now,
                    retention: self.config.idempotency_retention,
                },
            );
            // Nothing was written: ending the transaction at once lets the
            // creates queued on the key's lock go on.
            match decision {
                Replay::Existing => {
                    super::commit(tx).await?;
                    return Ok(Some(KeyedOutcome::Replayed(existing.task)));
                }
                Replay::InUse => {
                    super::commit(tx).await?;
                    return Err(StoreError::FailedPrecondition(Refusal::IdempotencyKeyInUse));
                }
                Replay::Expired => {}
            }
        }
        let row = row?;
        // The key is free: whatever still holds it (a task past the key's
        // retention, or an expired task not yet swept away) lets go of it.
        sqlx::query(sql!(
            "UPDATE tasks SET idempotency_key = NULL WHERE tenant_id = $1 AND idempotency_key = $2"
        ))
        .bind(scope.tenant.as_str())
        .bind(key.as_str())
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
        Ok(self
            .insert_alone(tx, scope, row)
            .await?
            .map(KeyedOutcome::Created))
    }

    /// The live task of the tenant that holds `key`, with its request.
    async fn keyed_task(
        &self,
        tx: &mut Transaction<'static, Postgres>,
        scope: &Scope,
        key: &IdempotencyKey,
    ) -> Result<Option<KeyedRow>, StoreError> {
        sqlx::query_as::<_, KeyedRow>(sql!(concat!(
            "SELECT ",
            task_columns!(),
            ", request_json, now() AS now FROM tasks",
            " WHERE tenant_id = $1 AND idempotency_key = $2 AND ",
            live!()
        )))
        .bind(scope.tenant.as_str())
        .bind(key.as_str())
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)
    }
}

/// Serializes the creates that carry `key` in the tenant, until commit.
async fn lock_key(
    tx: &mut Transaction<'static, Postgres>,
    scope: &Scope,
    key: &IdempotencyKey,
) -> Result<(), StoreError> {
    // Length-prefixed, so that no (tenant, key) pair reads as another.
    let lock = format!(
        "taskstore/idempotency/{}/{}/{}",
        scope.tenant.as_str().len(),
        scope.tenant.as_str(),
        key.as_str()
    );
    super::advisory::lock_until_commit(tx, lock).await
}
