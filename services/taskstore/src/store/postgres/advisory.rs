//! Transaction-scoped advisory locks, named by text (hashed): what must not
//! interleave across replicas waits for, or skips, the transaction holding
//! the name until it commits. Creates under one quota or with one
//! idempotency key wait (`lock_until_commit`); a tool's dispatch decision is
//! taken by one replica at a time, the others leaving it to the holder
//! (`try_lock_until_commit`).

use sqlx::Postgres;

use super::error::store_error;
use crate::error::StoreError;
use crate::store::statements::sql;

/// Waits for the lock named `name`, then holds it until commit.
pub(super) async fn lock_until_commit(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    name: String,
) -> Result<(), StoreError> {
    sqlx::query(sql!(
        "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))"
    ))
    .bind(name)
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}

/// Takes the lock named `name` until commit if nobody holds it; whether it
/// was taken.
pub(super) async fn try_lock_until_commit(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    name: String,
) -> Result<bool, StoreError> {
    sqlx::query_scalar(sql!(
        "SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))"
    ))
    .bind(name)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)
}
