//! API keys in PostgreSQL (`api_keys`, migration 0006).

use async_trait::async_trait;
use sqlx::PgPool;

use super::{COLUMNS, KeyRow, KeyStore, StoredKey, key_of_row, tenant_column};
use crate::error::StoreError;
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

#[async_trait]
impl KeyStore for PgKeys {
    async fn insert_key(&self, key: &StoredKey) -> Result<(), StoreError> {
        sqlx::query(&format!(
            "INSERT INTO api_keys ({COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
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
        .map_err(store_error)?;
        Ok(())
    }

    async fn find_key(&self, key_id: &str) -> Result<Option<StoredKey>, StoreError> {
        let row: Option<KeyRow> =
            sqlx::query_as(&format!("SELECT {COLUMNS} FROM api_keys WHERE key_id = $1"))
                .bind(key_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(store_error)?;
        row.map(key_of_row).transpose()
    }

    async fn list_keys(&self) -> Result<Vec<StoredKey>, StoreError> {
        let rows: Vec<KeyRow> = sqlx::query_as(&format!(
            "SELECT {COLUMNS} FROM api_keys ORDER BY created_at, key_id"
        ))
        .fetch_all(&self.pool)
        .await
        .map_err(store_error)?;
        rows.into_iter().map(key_of_row).collect()
    }

    async fn revoke_key(&self, key_id: &str) -> Result<bool, StoreError> {
        let revoked = sqlx::query(
            "UPDATE api_keys SET revoked_at = now() WHERE key_id = $1 AND revoked_at IS NULL",
        )
        .bind(key_id)
        .execute(&self.pool)
        .await
        .map_err(store_error)?;
        Ok(revoked.rows_affected() == 1)
    }

    async fn record_use(&self, key_id: &str) -> Result<(), StoreError> {
        sqlx::query("UPDATE api_keys SET last_used_at = now() WHERE key_id = $1")
            .bind(key_id)
            .execute(&self.pool)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
