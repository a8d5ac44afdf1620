//! Reaching PostgreSQL: why it cannot be reached, in words, and the secret
//! every replica shares (created by the first one).

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use super::error::store_error;
use crate::domain::CursorCodec;
use crate::error::StoreError;
use crate::store::statements::sql;

const CURSOR_KEY_NAME: &str = "cursor_hmac_key";

/// Why PostgreSQL at `options` cannot be reached, in words, or `None` when
/// it can. A pool that cannot connect only says it timed out; one direct
/// connection says why (connection refused, unknown host, bad password...).
pub async fn unreachable_because(options: &PgConnectOptions) -> Option<String> {
    const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
    let place = format!(
        "PostgreSQL at {}:{} (database {})",
        options.get_host(),
        options.get_port(),
        options.get_database().unwrap_or("of the user's name")
    );
    let probe = <sqlx::PgConnection as sqlx::Connection>::connect_with(options);
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(connection)) => {
            let _ = sqlx::Connection::close(connection).await;
            None
        }
        Ok(Err(err)) => Some(format!("{place} is unreachable: {err}")),
        Err(_) => Some(format!(
            "{place} did not answer within {}",
            humantime::format_duration(PROBE_TIMEOUT)
        )),
    }
}

/// The cursor key every replica shares: the first replica to start creates
/// it, the others read the same row.
pub(super) async fn shared_cursor_key(
    pool: &PgPool,
) -> Result<[u8; CursorCodec::KEY_BYTES], StoreError> {
    let mut candidate = [0u8; CursorCodec::KEY_BYTES];
    getrandom::getrandom(&mut candidate).map_err(|err| {
        tracing::error!(error = %err, "no randomness for the cursor key");
        StoreError::Internal("could not generate the cursor key".to_owned())
    })?;
    sqlx::query(sql!(
        "INSERT INTO store_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING"
    ))
    .bind(CURSOR_KEY_NAME)
    .bind(&candidate[..])
    .execute(pool)
    .await
    .map_err(store_error)?;
    let stored: Vec<u8> =
        sqlx::query_scalar(sql!("SELECT value FROM store_secrets WHERE name = $1"))
            .bind(CURSOR_KEY_NAME)
            .fetch_one(pool)
            .await
            .map_err(store_error)?;
    stored.try_into().map_err(|_| {
        tracing::error!("stored cursor key has the wrong length");
        StoreError::Internal("corrupt cursor key".to_owned())
    })
}

/// Warns when autovacuum is off: the task and outbox tables change with every
/// step of every task, and without VACUUM they bloat until every statement
/// slows down (docs/operations.md, "Vacuum"). A failed check is not fatal.
pub(super) async fn warn_when_autovacuum_is_off(pool: &PgPool) {
    let enabled = sqlx::query_scalar::<_, bool>(sql!(
        "SELECT current_setting('autovacuum') = 'on'
            AND NOT EXISTS (SELECT 1 FROM pg_class
                            WHERE relname IN ('tasks', 'dispatch_outbox')
                              AND relkind = 'r'
                              AND pg_table_is_visible(oid)
                              AND 'autovacuum_enabled=false' = ANY(coalesce(reloptions, '{}')))"
    ))
    .fetch_one(pool)
    .await;
    match enabled {
        Ok(true) => {}
        Ok(false) => tracing::warn!(
            "autovacuum is off for the task tables: under sustained load they bloat and every statement slows down; turn it on, or VACUUM tasks and dispatch_outbox regularly (docs/operations.md)"
        ),
        Err(err) => tracing::debug!(error = %err, "could not check autovacuum"),
    }
}
