//! The rows of `domain::dispatch_view` on PostgreSQL: the ready backlog per
//! tool (its partial index), and the small tables of the decision (slots
//! that hold, starts within their windows, pauses not over).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::PgTaskStore;
use super::error::store_error;
use crate::domain::DispatchRows;
use crate::error::StoreError;
use crate::store::statements::sql;

fn count(n: i64) -> u32 {
    u32::try_from(n.max(0)).unwrap_or(u32::MAX)
}

impl PgTaskStore {
    /// `OperationsStore::lift_pause`: the pause's row goes, and the jobs of
    /// the key's tasks due before its end (the ones that backed off) are
    /// due now; the relay looks at once.
    pub(super) async fn lift(&self, tool: &str, key: &str) -> Result<bool, StoreError> {
        let lifted: Option<bool> = sqlx::query_scalar(sql!(
            "WITH lifted AS (
                 DELETE FROM dispatch_pauses WHERE tool = $1 AND pause_key = $2 AND until > now()
                 RETURNING until),
             due AS (
                 UPDATE dispatch_outbox o SET available_at = now()
                 FROM tasks k, lifted
                 WHERE k.tenant_id = o.tenant_id AND k.task_id = o.task_id AND o.tool = $1
                   AND COALESCE(k.rate_key, k.limit_key, '') = $2
                   AND o.publishes = 0
                   AND NOT o.ready AND o.available_at > now() AND o.available_at <= lifted.until)
             SELECT true FROM lifted"
        ))
        .bind(tool)
        .bind(key)
        .fetch_optional(self.pool())
        .await
        .map_err(store_error)?;
        self.outbox.notify_one();
        Ok(lifted.is_some())
    }

    pub(super) async fn dispatch_rows(&self) -> Result<DispatchRows, StoreError> {
        // By the key each job waits under (`domain::pause_key`): a probe of
        // its task per ready row, read for operators every few seconds.
        let waiting: Vec<(String, String, i64, f64)> = sqlx::query_as(sql!(
            "SELECT o.tool, COALESCE(k.rate_key, k.limit_key, ''), count(*),
                    (extract(epoch FROM now() - min(o.available_at)) * 1000)::float8
             FROM dispatch_outbox o
             LEFT JOIN tasks k ON k.tenant_id = o.tenant_id AND k.task_id = o.task_id
             WHERE o.ready GROUP BY 1, 2"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;
        let running: Vec<(String, String, i64, i32)> = sqlx::query_as(sql!(concat!(
            "SELECT s.tool, s.limit_key, count(*), min(t.limit_max)",
            " FROM dispatch_slots s JOIN tasks t",
            " ON t.tenant_id = s.tenant_id AND t.task_id = s.task_id WHERE ",
            holds_slot!("t.", "s."),
            " GROUP BY s.tool, s.limit_key"
        )))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;
        let started: Vec<(String, String, i64)> = sqlx::query_as(sql!(
            "SELECT tool, rate_key, count(*) FROM dispatch_starts
             WHERE expires_at > now() GROUP BY tool, rate_key"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;
        let paused: Vec<(String, String, DateTime<Utc>)> = sqlx::query_as(sql!(
            "SELECT tool, pause_key, until FROM dispatch_pauses WHERE until > now()"
        ))
        .fetch_all(self.pool())
        .await
        .map_err(store_error)?;
        Ok(DispatchRows {
            waiting: waiting
                .into_iter()
                .map(|(tool, key, n, ms)| {
                    let n = u64::try_from(n).unwrap_or(0);
                    (tool, key, n, Duration::from_secs_f64(ms.max(0.0) / 1000.0))
                })
                .collect(),
            running: running
                .into_iter()
                .map(|(tool, key, n, max)| (tool, key, count(n), count(i64::from(max))))
                .collect(),
            started: started
                .into_iter()
                .map(|(tool, key, n)| (tool, key, count(n)))
                .collect(),
            paused,
        })
    }
}
