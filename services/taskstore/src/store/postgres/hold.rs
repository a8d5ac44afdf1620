//! Tasks held by their caller (`domain::execution::hold`) on PostgreSQL: a
//! first hold makes the task a dispatched task of one attempt with a lease
//! and no job, so that the lease reaper (`dispatch.rs`) ends it when its
//! holder stops renewing, as it ends a lost worker's attempt.

use super::PgTaskStore;
use super::error::store_error;
use super::rows::millis;
use crate::domain::{
    HoldOutcome, HoldRefusal, HoldState, HoldStep, Holder, LeaseToken, Scope, TaskId, TaskStatus,
    decide_hold, held_by,
};
use crate::error::{Refusal, StoreError};
use crate::store::statements::sql;

#[derive(sqlx::FromRow)]
struct HoldRow {
    status: String,
    dispatched: bool,
    lease_token: Option<String>,
    has_tool: bool,
}

impl PgTaskStore {
    pub(super) async fn hold(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &Holder,
        renewing: Option<&LeaseToken>,
    ) -> Result<HoldOutcome, StoreError> {
        let duration = self.config.execution.lease_duration;
        let mut tx = self.begin().await?;
        let row = sqlx::query_as::<_, HoldRow>(sql!(concat!(
            "SELECT status, max_attempts IS NOT NULL AS dispatched, lease_token,",
            " tool IS NOT NULL AS has_tool FROM tasks WHERE ",
            visible_task!(),
            " FOR UPDATE"
        )))
        .bind(scope.tenant.as_str())
        .bind(task_id.as_str())
        .bind(scope.session.as_ref().map(|s| s.as_str()))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?
        .ok_or(StoreError::NotFound)?;
        let status: TaskStatus = row
            .status
            .parse()
            .map_err(|_| StoreError::Internal("corrupt task row".into()))?;
        let current = row
            .lease_token
            .as_deref()
            .map(LeaseToken::parse)
            .transpose()
            .map_err(|_| StoreError::Internal("corrupt lease token".into()))?;
        let step = decide_hold(
            &HoldState {
                status,
                dispatched: row.dispatched,
                lease: current.as_ref(),
            },
            renewing,
        )
        .map_err(|refusal| StoreError::from(Refusal::Hold(refusal)))?;
        let token = match step {
            HoldStep::Stop(reason) => return Ok(HoldOutcome::Stop(reason)),
            HoldStep::Renew => {
                sqlx::query(
                    sql!("UPDATE tasks SET lease_expires_at = now() + $3 * interval '1 millisecond' WHERE tenant_id = $1 AND task_id = $2"),
                )
                .bind(scope.tenant.as_str())
                .bind(task_id.as_str())
                .bind(millis(duration))
                .execute(&mut *tx)
                .await
                .map_err(store_error)?;
                current.ok_or_else(|| StoreError::Internal("a renewed hold has no lease".into()))?
            }
            HoldStep::Grant => {
                if !row.has_tool {
                    return Err(Refusal::Hold(HoldRefusal::NotAToolCall).into());
                }
                let token = LeaseToken::generate()
                    .map_err(|_| StoreError::Internal("no randomness for a lease".into()))?;
                let effects = held_by(holder, token.clone(), duration);
                super::apply::apply(&mut tx, scope.tenant.as_str(), task_id.as_str(), &effects)
                    .await?;
                token
            }
        };
        super::commit(tx).await?;
        Ok(HoldOutcome::Held {
            lease: token,
            duration,
        })
    }
}
