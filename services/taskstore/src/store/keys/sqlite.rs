//! API keys in the SQLite file (`api_keys`, migration 0003), read and
//! written through a pool of their own, so that `taskstore keys` may add
//! keys to the file of a running `dev`.

use async_trait::async_trait;
use chrono::Utc;
use sqlx::SqlitePool;

use super::{COLUMNS, KeyRow, KeyStore, StoredKey, key_of_row, tenant_column};
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

#[async_trait]
impl KeyStore for SqliteKeys {
    async fn insert_key(&self, key: &StoredKey) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO api_keys ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        ))
        .bind(&key.key_id)
        .bind(&key.secret_sha256[..])
        .bind(tenant_column(&key.reach))
        .bind(key.role.as_str())
        .bind(&key.name)
        .bind(key.created_at)
        .bind(key.revoked_at)
        .bind(key.last_used_at)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(())
    }

    async fn find_key(&self, key_id: &str) -> Result<Option<StoredKey>, StoreError> {
        let row: Option<KeyRow> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM api_keys WHERE key_id = ?"))
                .bind(key_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(failed)?;
        row.map(key_of_row).transpose()
    }

    async fn list_keys(&self) -> Result<Vec<StoredKey>, StoreError> {
        let rows: Vec<KeyRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM api_keys ORDER BY created_at, key_id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(failed)?;
        rows.into_iter().map(key_of_row).collect()
    }

    async fn revoke_key(&self, key_id: &str) -> Result<bool, StoreError> {
        let revoked = sqlx::query(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
        )
        .bind(Utc::now())
        .bind(key_id)
        .execute(&self.pool)
        .await
        .map_err(failed)?;
        Ok(revoked.rows_affected() == 1)
    }

    async fn record_use(&self, key_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE api_keys SET last_used_at = ? WHERE key_id = ?")
            .bind(Utc::now())
            .bind(key_id)
            .execute(&self.pool)
            .await
            .map_err(failed)?;
        Ok(())
    }
}
