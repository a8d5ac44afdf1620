//! When the service's connections may keep cached plans.
//!
//! PostgreSQL makes a prepared statement's generic plan at its sixth run on a
//! connection, costed from the tables' sizes at that moment, and keeps it
//! until the table is analyzed again. Made while `tasks` is small, the plan of
//! a lookup by id is a sequential scan, or a walk of the listing index
//! `(tenant_id, created_at, task_id)`. Without statistics, that index costs the
//! same as the primary key on a small table. The plan then stays while the
//! table grows: until autovacuum next analyzes it, or for the connection's
//! whole life on a PostgreSQL without autovacuum. Planning every run instead
//! cost 40% of PostgreSQL's CPU at 8 callers, and a fifth of `GetTask`'s rate
//! (BENCHMARKS.md, "Plans cached once the table is large").
//!
//! So a connection opened while the table is small plans every statement
//! with its values (`plan_cache_mode = force_custom_plan`). Once the table's
//! primary key has reached [`SETTLED_AT_BYTES`], connections opened from then
//! on keep the server's setting: by default PostgreSQL caches plans (a
//! database role may say otherwise, and is obeyed). The earlier connections are
//! closed as they are released, and the pool opens new ones. A plan made at
//! that size looks tasks up by the primary key, and it stays right as the
//! table grows. The size is read when a connection opens and, until the pool
//! has settled, at most once a second when one is released. A pool stays
//! settled for its life.
//!
//! Statements that bind arrays (batches) are sent unnamed, so they are planned
//! for their arrays' lengths whatever the mode (`batch_writer.rs`, "Plans").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sqlx::PgConnection;
use sqlx::pool::PoolConnectionMetadata;
use sqlx::postgres::PgPoolOptions;

use crate::store::statements::sql;

/// The size of `tasks`' primary key from which cached plans are safe: 16
/// pages, about 2,000 index entries. From about 1,000 entries on, a generic
/// plan of a lookup by id takes the primary key.
pub(super) const SETTLED_AT_BYTES: i64 = 16 * 8192;

/// How often a release may read the table's size while the pool has not
/// settled.
const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Whether the primary key is past the threshold (`$1`); not before the
/// migrations have made it.
macro_rules! past_threshold {
    () => {
        "COALESCE(pg_relation_size(to_regclass('tasks_pkey')), 0) >= $1::bigint"
    };
}

const SETTLED_SQL: &str = concat!("SELECT ", past_threshold!());

/// The same, and on a small table sets the session to plan every statement
/// (a larger one keeps the server's setting).
const CONNECT_SQL: &str = concat!(
    "SELECT settled FROM (SELECT ",
    past_threshold!(),
    " AS settled) s",
    " WHERE CASE WHEN settled THEN true",
    " ELSE set_config('plan_cache_mode', 'force_custom_plan', false) IS NOT NULL END"
);

/// One pool's plan mode: whether (and since when) it has settled.
#[derive(Debug)]
pub(super) struct PlanMode {
    origin: Instant,
    settled_at: OnceLock<Instant>,
    /// Nanoseconds after `origin` before which no release reads the size.
    next_check: AtomicU64,
}

impl PlanMode {
    pub(super) fn new() -> Self {
        Self {
            origin: Instant::now(),
            settled_at: OnceLock::new(),
            next_check: AtomicU64::new(0),
        }
    }

    /// The pool's hooks: each new connection gets its plan mode, and each
    /// released one is kept or closed.
    pub(super) fn install(self: Arc<Self>, pool: PgPoolOptions) -> PgPoolOptions {
        let on_release = Arc::clone(&self);
        pool.after_connect(move |conn, _| {
            let mode = Arc::clone(&self);
            Box::pin(async move { mode.on_connect(conn).await })
        })
        .after_release(move |conn, meta| {
            let mode = Arc::clone(&on_release);
            Box::pin(async move { mode.on_release(conn, meta).await })
        })
    }

    async fn on_connect(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        if self.settled_at.get().is_some() {
            return Ok(());
        }
        self.look(conn, sql!(CONNECT_SQL)).await
    }

    /// Whether a released connection goes back to the pool.
    async fn on_release(
        &self,
        conn: &mut PgConnection,
        meta: PoolConnectionMetadata,
    ) -> Result<bool, sqlx::Error> {
        let now = Instant::now();
        let opened = now.checked_sub(meta.age).unwrap_or(self.origin);
        if self.settled_at.get().is_none() && self.claim_check(now) {
            self.look(conn, sql!(SETTLED_SQL)).await?;
        }
        Ok(keeps(self.settled_at.get().copied(), opened))
    }

    /// Runs `sql` (one of the two above) and settles when it says so.
    async fn look(&self, conn: &mut PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
        let settled: bool = sqlx::query_scalar(sql)
            .bind(SETTLED_AT_BYTES)
            .fetch_one(conn)
            .await?;
        if settled {
            self.settle();
        }
        Ok(())
    }

    fn settle(&self) {
        if self.settled_at.set(Instant::now()).is_ok() {
            tracing::info!(
                primary_key_bytes_at_least = SETTLED_AT_BYTES,
                "tasks table large enough: new connections cache their plans"
            );
        }
    }

    /// True for the one release that may read the size now.
    fn claim_check(&self, now: Instant) -> bool {
        let at = nanos_since(self.origin, now);
        let due = self.next_check.load(Ordering::Relaxed);
        at >= due
            && self
                .next_check
                .compare_exchange(
                    due,
                    at + nanos(CHECK_EVERY),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
    }
}

/// A connection opened before the pool settled plans every statement: it is
/// closed when released, so that its replacement caches plans. Connections
/// opened since are kept.
fn keeps(settled_at: Option<Instant>, opened: Instant) -> bool {
    settled_at.is_none_or(|settled| opened >= settled)
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

fn nanos_since(origin: Instant, now: Instant) -> u64 {
    nanos(now.saturating_duration_since(origin))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_opened_before_settling_are_closed_on_release() {
        let start = Instant::now();
        let later = start + Duration::from_secs(5);
        assert!(
            keeps(None, start),
            "nothing settled: every connection stays"
        );
        assert!(!keeps(Some(later), start), "opened before: closed");
        assert!(keeps(Some(start), later), "opened since: kept");
        assert!(keeps(Some(start), start));
    }

    #[test]
    fn one_release_a_second_reads_the_size() {
        let mode = PlanMode::new();
        let now = mode.origin;
        assert!(mode.claim_check(now));
        assert!(!mode.claim_check(now + Duration::from_millis(999)));
        assert!(mode.claim_check(now + CHECK_EVERY));
        assert!(!mode.claim_check(now + CHECK_EVERY));
    }
}
