//! API keys in the SQLite file (`api_keys`, migration 0003), read and
//! written through a pool of their own, so that `taskstore keys` may add
//! keys to the file of a running `dev`. The statements are `sql.rs`'s,
//! shared with PostgreSQL.

use sqlx::SqlitePool;

use crate::error::StoreError;

#[derive(Debug, Clone)]
pub struct SqliteKeys {
    pool: SqlitePool,
}

impl SqliteKeys {
    pub fn new(pool: SqlitePool) -> Self {
        Self { pool }
    }
}

fn failed(err: sqlx::Error) -> StoreError {
    tracing::error!(error = %err, "sqlite api key query failed");
    StoreError::Internal("the key store failed".to_owned())
}

sql_key_store!(SqliteKeys, failed, Sqlite);
