//! The key store's statements, written once for the two SQL databases.
//!
//! sqlx offers no statement type generic over PostgreSQL and SQLite short
//! of `Any` (which loses the column types), so the implementation is a
//! macro instantiated per pool type. The statements keep to what both
//! dialects accept: `$n` placeholders (SQLite numbers `$1`, `$2` in order
//! of appearance, which these follow), `ON CONFLICT (…) DO NOTHING`, and
//! times bound from the process, never the database's clock.

/// `impl KeyStore for $store`, whose `pool` field is a sqlx pool of the
/// database `$dialect` ([`Dialect`](crate::store::statements::Dialect)),
/// with `$failed` turning a sqlx error into a
/// [`StoreError`](crate::error::StoreError).
/// The columns a [`KeyRow`](super::KeyRow) is read from and a key is
/// written to.
macro_rules! key_columns {
    () => {
        "key_id, secret_sha256, tenant_id, role, name, created_at, revoked_at, last_used_at"
    };
}

macro_rules! sql_key_store {
    ($store:ty, $failed:path, $dialect:ident) => {
        impl $store {
            /// Runs a statement that returns no rows; how many it changed.
            async fn execute<'q>(
                &self,
                query: sqlx::query::Query<
                    'q,
                    sqlx::$dialect,
                    <sqlx::$dialect as sqlx::Database>::Arguments<'q>,
                >,
            ) -> Result<u64, $crate::error::StoreError> {
                query
                    .execute(&self.pool)
                    .await
                    .map(|done| done.rows_affected())
                    .map_err($failed)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::keys::KeyStore for $store {
            async fn insert_key(
                &self,
                key: &$crate::store::keys::StoredKey,
            ) -> Result<(), $crate::error::StoreError> {
                let insert = sqlx::query($crate::store::statements::sql!($dialect: concat!(
                    "INSERT INTO api_keys (",
                    key_columns!(),
                    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
                )))
                .bind(&key.key_id)
                .bind(&key.secret_sha256[..])
                .bind($crate::store::keys::tenant_column(&key.reach))
                .bind(key.role.as_str())
                .bind(&key.name)
                .bind(key.created_at)
                .bind(key.revoked_at)
                .bind(key.last_used_at);
                self.execute(insert).await.map(drop)
            }

            async fn find_key(
                &self,
                key_id: &str,
            ) -> Result<Option<$crate::store::keys::StoredKey>, $crate::error::StoreError> {
                let row: Option<$crate::store::keys::KeyRow> = sqlx::query_as($crate::store::statements::sql!($dialect: concat!(
                    "SELECT ",
                    key_columns!(),
                    " FROM api_keys WHERE key_id = $1"
                )))
                .bind(key_id)
                .fetch_optional(&self.pool)
                .await
                .map_err($failed)?;
                row.map($crate::store::keys::key_of_row).transpose()
            }

            async fn list_keys(
                &self,
            ) -> Result<Vec<$crate::store::keys::StoredKey>, $crate::error::StoreError> {
                let rows: Vec<$crate::store::keys::KeyRow> = sqlx::query_as($crate::store::statements::sql!($dialect: concat!(
                    "SELECT ",
                    key_columns!(),
                    " FROM api_keys ORDER BY created_at, key_id"
                )))
                .fetch_all(&self.pool)
                .await
                .map_err($failed)?;
                rows.into_iter()
                    .map($crate::store::keys::key_of_row)
                    .collect()
            }

            async fn revoke_key(&self, key_id: &str) -> Result<bool, $crate::error::StoreError> {
                let revoke = sqlx::query(
                    $crate::store::statements::sql!($dialect: "UPDATE api_keys SET revoked_at = $1 WHERE key_id = $2 AND revoked_at IS NULL"),
                )
                .bind(chrono::Utc::now())
                .bind(key_id);
                Ok(self.execute(revoke).await? == 1)
            }

            async fn record_use(&self, key_id: &str) -> Result<(), $crate::error::StoreError> {
                let record = sqlx::query($crate::store::statements::sql!($dialect: "UPDATE api_keys SET last_used_at = $1 WHERE key_id = $2"))
                    .bind(chrono::Utc::now())
                    .bind(key_id);
                self.execute(record).await.map(drop)
            }

            async fn end_session(
                &self,
                session_id: &str,
                until: chrono::DateTime<chrono::Utc>,
            ) -> Result<(), $crate::error::StoreError> {
                // The ended sessions that expired since are deleted on the way.
                let forget_expired = sqlx::query($crate::store::statements::sql!($dialect: "DELETE FROM dashboard_ended_sessions WHERE ended_until < $1"))
                    .bind(chrono::Utc::now());
                self.execute(forget_expired).await?;
                let end = sqlx::query(
                    $crate::store::statements::sql!($dialect: "INSERT INTO dashboard_ended_sessions (session_id, ended_until) VALUES ($1, $2)
                     ON CONFLICT (session_id) DO NOTHING"),
                )
                .bind(session_id)
                .bind(until);
                self.execute(end).await.map(drop)
            }

            async fn session_ended(
                &self,
                session_id: &str,
            ) -> Result<bool, $crate::error::StoreError> {
                sqlx::query_scalar(
                    $crate::store::statements::sql!($dialect: "SELECT EXISTS (SELECT 1 FROM dashboard_ended_sessions WHERE session_id = $1)"),
                )
                .bind(session_id)
                .fetch_one(&self.pool)
                .await
                .map_err($failed)
            }
        }
    };
}
