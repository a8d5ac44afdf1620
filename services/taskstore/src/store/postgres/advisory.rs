//! Transaction-scoped advisory locks, named by text (hashed): what must not
//! interleave across replicas waits for, or skips, the transaction holding
//! the name until it commits. Creates under one quota or with one
//! idempotency key wait (`lock_until_commit`); a tool's dispatch decision is
//! taken by one replica at a time, the others leaving it to the holder
//! (`try_lock_until_commit`).
//!
//! Advisory locks are the database's, not a schema's: outside the default
//! schema a name is qualified with the schema the tables live in
//! (`current_schema()`), so that services that share a database in schemas
//! of their own (and tests, each in its own schema) never wait for, or
//! skip, each other's work. In `public` the name stays as earlier releases
//! wrote it, so that replicas of both exclude each other during an upgrade.

use sqlx::Postgres;

/// A lock's name in SQL: qualified with the schema outside `public`.
macro_rules! schema_qualified {
    ($name:literal) => {
        concat!(
            "CASE current_schema() WHEN 'public' THEN ",
            $name,
            " ELSE current_schema() || '/' || ",
            $name,
            " END"
        )
    };
}

use super::error::store_error;
use crate::error::StoreError;
use crate::store::statements::sql;

/// Waits for the lock named `name`, then holds it until commit.
pub(super) async fn lock_until_commit(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    name: String,
) -> Result<(), StoreError> {
    sqlx::query(sql!(concat!(
        "SELECT pg_advisory_xact_lock(hashtextextended(",
        schema_qualified!("$1"),
        ", 0))"
    )))
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
    sqlx::query_scalar(sql!(concat!(
        "SELECT pg_try_advisory_xact_lock(hashtextextended(",
        schema_qualified!("$1"),
        ", 0))"
    )))
    .bind(name)
    .fetch_one(&mut **tx)
    .await
    .map_err(store_error)
}
