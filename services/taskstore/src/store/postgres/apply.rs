//! The one place PostgreSQL applies a decision's [`Effects`] to a task
//! (memory's is `store/memory/apply.rs`): one statement for every shape of
//! effects, in the caller's transaction. A part the effects leave alone is
//! written back unchanged, which PostgreSQL sees as no change: the update
//! stays HOT unless an indexed column really changes (migration 0007).
//! Every applied `Effects` moves `last_updated_at` (which is all a touch
//! does), and the task-change trigger announces the row (migration 0002).

use sqlx::{Postgres, Transaction};

use super::error::store_error;
use super::history::{history_ended, history_started};
use super::rows::millis;
use crate::domain::{DispatchChange, Effects, JsonObject, LeaseChange};
use crate::error::StoreError;
use crate::store::statements::sql;

/// Applies `effects` to the task `(tenant, task_id)`, which the caller has
/// locked and read.
pub(super) async fn apply(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    task_id: &str,
    effects: &Effects,
) -> Result<(), StoreError> {
    if effects.is_none() {
        return Ok(());
    }
    let (dispatch, after) = match effects.dispatch {
        DispatchChange::Keep => (None, None),
        DispatchChange::Again { after } => (Some("again"), Some(millis(after))),
        DispatchChange::Park => (Some("park"), None),
    };
    let ended = effects.attempt_ended.as_ref();
    let (lease, grant) = match &effects.lease {
        LeaseChange::Keep => (None, None),
        LeaseChange::Clear => (Some("clear"), None),
        LeaseChange::Grant(grant) => (Some("grant"), Some(grant)),
    };
    let attempts = effects.attempts.or(grant.map(|grant| grant.attempt));
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    sqlx::query(sql!(concat!(
        "WITH task AS (
             UPDATE tasks SET
                 status = COALESCE($3::text, status),
                 status_message = CASE WHEN $4::bool THEN $5::text ELSE status_message END,
                 result_json = COALESCE($6::text, result_json),
                 lease_token = CASE $7::text WHEN 'clear' THEN NULL WHEN 'grant' THEN $13::text
                     ELSE lease_token END,
                 lease_owner = CASE $7::text WHEN 'clear' THEN NULL WHEN 'grant' THEN $14::text
                     ELSE lease_owner END,
                 lease_session = CASE $7::text WHEN 'clear' THEN NULL WHEN 'grant' THEN ",
        live_session!("$17::text"),
        " ELSE lease_session END,
                 lease_expires_at = CASE $7::text WHEN 'clear' THEN NULL
                     WHEN 'grant' THEN now() + $15::bigint * interval '1 millisecond'
                     ELSE lease_expires_at END,
                 attempt = COALESCE($8::integer, attempt),
                 max_attempts = COALESCE($16::integer, max_attempts),
                 dispatch_generation = dispatch_generation
                     + CASE WHEN $9::text IS NULL THEN 0 ELSE 1 END,
                 parked_at = CASE $9::text WHEN 'park' THEN now() WHEN 'again' THEN NULL
                     ELSE parked_at END,
                 last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond'),
                 expires_at = CASE WHEN $3::text IN ('completed', 'failed', 'cancelled')
                     THEN GREATEST(expires_at, now() + ttl_ms * interval '1 millisecond')
                     ELSE expires_at END,
                 attempt_history = CASE WHEN $11::text IS NOT NULL THEN ",
        history_ended!("attempt_history", "$11", "$12"),
        " WHEN $7::text = 'grant' THEN ",
        history_started!("attempt_history", "$8", "$14"),
        " ELSE attempt_history END
             WHERE tenant_id = $1 AND task_id = $2
             RETURNING tenant_id, task_id, dispatch_generation, tool, priority, fairness_key)
         INSERT INTO dispatch_outbox (tenant_id, task_id, generation, tool, priority,
                                      fairness_key, available_at)
         SELECT tenant_id, task_id, dispatch_generation, tool, priority,
                COALESCE(fairness_key, ''),
                now() + $10::bigint * interval '1 millisecond'
         FROM task WHERE $9::text = 'again'"
    )))
    .bind(tenant)
    .bind(task_id)
    .bind(effects.status.map(|status| status.as_str()))
    .bind(effects.message.is_some())
    .bind(effects.message.clone().flatten())
    .bind(effects.result.as_ref().map(JsonObject::as_str))
    .bind(lease)
    .bind(attempts.map(count))
    .bind(dispatch)
    .bind(after)
    .bind(ended.map(|outcome| outcome.kind()))
    .bind(ended.and_then(|outcome| outcome.message()))
    .bind(grant.map(|grant| grant.token.as_str()))
    .bind(grant.map(|grant| grant.owner.as_str()))
    .bind(grant.map(|grant| millis(grant.duration)))
    .bind(effects.max_attempts.map(count))
    .bind(grant.and_then(|grant| grant.session.as_ref().map(|s| s.as_str())))
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}
