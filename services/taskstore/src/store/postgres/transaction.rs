//! Transactions that a cancelled caller cannot leave open.
//!
//! sqlx 0.8.6's `Pool::begin` is not cancel-safe on PostgreSQL
//! (transact-rs/sqlx#4393, still so in 0.9.0): a future dropped while its
//! `BEGIN` is in flight (a client that hung up, a deadline, a `select!`)
//! leaves the session inside a transaction that nothing ends, and the pool
//! hands that connection to the next caller. Its statements then run inside
//! the stale transaction: their writes are not committed when their callers
//! are told they are (a task created and then "not found"), their locks are
//! held until the connection dies (two change-listener registrations
//! deadlocked that way), and a read-only snapshot answers from the past.
//!
//! [`begin`] runs the `BEGIN` on a task of its own, which a cancelled caller
//! does not cancel: the transaction is always either handed over or dropped
//! whole, and a dropped one queues its `ROLLBACK` before its connection goes
//! back to the pool. [`commit`] does the same for the `COMMIT`, so that a
//! caller cancelled while committing leaves neither a transaction whose
//! outcome the connection misreads nor a stray `ROLLBACK` after it. Every
//! PostgreSQL transaction of the service begins and commits here;
//! `clippy.toml` refuses sqlx's own `begin` and `commit` everywhere else.

use sqlx::{PgPool, Postgres, Transaction};

/// Begins a transaction on `pool`, with `statement` instead of a plain
/// `BEGIN` when given (an isolation level, `SET LOCAL`s).
#[allow(clippy::disallowed_methods)] // the one cancel-safe place
pub(crate) async fn begin(
    pool: &PgPool,
    statement: Option<&'static str>,
) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let pool = pool.clone();
    let beginning = tokio::spawn(async move {
        match statement {
            Some(statement) => pool.begin_with(statement).await,
            None => pool.begin().await,
        }
    });
    beginning
        .await
        .unwrap_or_else(|join| Err(lost("beginning", &join)))
}

/// Commits `tx` on a task of its own (see the module's comment).
#[allow(clippy::disallowed_methods)] // the one cancel-safe place
pub(crate) async fn commit(tx: Transaction<'static, Postgres>) -> Result<(), sqlx::Error> {
    tokio::spawn(tx.commit())
        .await
        .unwrap_or_else(|join| Err(lost("committing", &join)))
}

/// A spawned step that did not finish: cancelled only when the runtime
/// shuts down (which closes the connection with it), or a panic in sqlx.
fn lost(step: &str, join: &tokio::task::JoinError) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(format!(
        "{step} a transaction failed: {join}"
    )))
}
