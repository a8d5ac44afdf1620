//! Worker sessions on PostgreSQL (migration 0023): one row per worker
//! process, renewed every lease / 3 whatever the number of its attempts.
//! An expired session is over for good: renewing it says so. The reaper
//! reaches its attempts from its row, and deletes the row an hour later
//! (`SESSION_KEPT`): a claim made as the session expired has long been
//! found by then (a missing session is as dead as an expired one).

use std::time::Duration;

use super::PgTaskStore;
use super::error::store_error;
use super::rows::millis;
use crate::domain::{SessionRenewal, WorkerSession};
use crate::error::StoreError;
use crate::store::statements::sql;

/// How long an expired session's row stays, so that the reaper reaches
/// every attempt claimed in it, even one whose claim committed just as the
/// session expired.
const SESSION_KEPT: Duration = Duration::from_secs(3600);

impl PgTaskStore {
    /// `ExecutionStore::renew_session`: one row written, one commit.
    pub(super) async fn renew_worker_session(
        &self,
        worker: &str,
        session: &WorkerSession,
        open: bool,
    ) -> Result<SessionRenewal, StoreError> {
        let lease_duration = self.config.execution.lease_duration;
        let lease_ms = millis(lease_duration);
        let renewed = if open {
            sqlx::query(sql!(
                "INSERT INTO worker_sessions (session_id, worker_id, expires_at)
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond')
                 ON CONFLICT (session_id) DO UPDATE SET expires_at = EXCLUDED.expires_at
                 WHERE worker_sessions.expires_at >= now()"
            ))
            .bind(session.as_str())
            .bind(worker)
            .bind(lease_ms)
            .execute(self.pool())
            .await
        } else {
            sqlx::query(sql!(
                "UPDATE worker_sessions SET expires_at = now() + $2 * interval '1 millisecond'
                 WHERE session_id = $1 AND expires_at >= now()"
            ))
            .bind(session.as_str())
            .bind(lease_ms)
            .execute(self.pool())
            .await
        }
        .map_err(store_error)?
        .rows_affected();
        Ok(if renewed == 1 {
            SessionRenewal::KeepRunning { lease_duration }
        } else {
            SessionRenewal::Over
        })
    }

    /// The sessions that expired (in the last `SESSION_KEPT`), through
    /// their expiry index.
    pub(super) async fn expired_sessions(&self) -> Result<Vec<String>, StoreError> {
        sqlx::query_scalar(sql!(
            "SELECT session_id FROM worker_sessions WHERE expires_at < now()"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)
    }

    /// Forgets the sessions expired for longer than `SESSION_KEPT`, through
    /// their expiry index: the reaper found their attempts long before.
    pub(super) async fn forget_expired_sessions(&self) -> Result<u64, StoreError> {
        Ok(sqlx::query(sql!(
            "DELETE FROM worker_sessions WHERE expires_at < now() - $1 * interval '1 millisecond'"
        ))
        .bind(millis(SESSION_KEPT))
        .execute(self.pool())
        .await
        .map_err(store_error)?
        .rows_affected())
    }
}
