//! API keys in PostgreSQL (`api_keys`, migration 0006), and the dashboard
//! sessions ended by a logout (migration 0016). The statements are
//! `sql.rs`'s, shared with SQLite.

use sqlx::PgPool;

use crate::store::postgres::store_error;

#[derive(Debug, Clone)]
pub struct PgKeys {
    pool: PgPool,
}

impl PgKeys {
    pub fn new(pool: PgPool) -> Self {
        Self { pool }
    }
}

sql_key_store!(PgKeys, store_error, Postgres);
