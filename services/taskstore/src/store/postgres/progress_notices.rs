//! Progress notices: a running task's progress told to its followers on
//! every replica without writing its row (`progress.rs` decides when).
//! One SELECT checks each report's fence exactly as a written progress
//! report is checked (visible in its scope, live, WORKING, held under the
//! lease) and sends the change's notification itself
//! (`taskstore_change_payload`, migration 0024), or, when no other replica
//! follows the tenant, leaves it to this replica to tell its own
//! subscribers. Notices that arrive together share one statement.

use std::collections::HashMap;

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::batch_writer;
use super::feed::{Quiet, Reach, unheard};
use super::rows::TaskRow;
use crate::store::statements::sql;

/// Most notices per statement.
const MAX_BATCH: usize = 256;

/// One progress report to tell without writing it.
#[derive(Debug, Clone)]
pub(super) struct Notice {
    pub tenant: String,
    pub task_id: String,
    pub session: Option<String>,
    pub lease: String,
    pub message: Option<String>,
}

#[derive(sqlx::FromRow)]
struct NoticedRow {
    tenant_id: String,
    #[sqlx(flatten)]
    task: TaskRow,
    progress_token: Option<String>,
    quiet: bool,
}

/// A notice waiting for its batch; no row when the fence refused it (the
/// report then takes the written path, which says why).
pub(super) type PendingNotice = batch_writer::Pending<Notice, TaskRow>;

/// Starts the writer; it ends when every sender is dropped.
pub(super) fn spawn(pool: PgPool, quiet: Quiet) -> mpsc::Sender<PendingNotice> {
    let one_per_task = |batch| {
        batch_writer::one_per_key(batch, |notice: &Notice| {
            (notice.tenant.clone(), notice.task_id.clone())
        })
    };
    batch_writer::spawn(MAX_BATCH, one_per_task, move |batch| {
        let pool = pool.clone();
        let quiet = quiet.clone();
        async move {
            let notices: Vec<Notice> = batch.iter().map(|p| p.request.clone()).collect();
            let outcome = notify(&pool, &quiet, &notices).await;
            batch_writer::answer(batch, outcome, |notice| (notice.tenant, notice.task_id));
        }
    })
}

/// The task as the notice shows it: its new message, and the time a
/// written change would have given it.
macro_rules! noticed_columns {
    () => {
        concat!(
            "t.task_id, t.session_id, t.status, c.message AS status_message, t.created_at,",
            " GREATEST(now(), t.last_updated_at + interval '1 microsecond') AS last_updated_at,",
            " t.ttl_ms, t.poll_interval_ms, t.tool"
        )
    };
}

/// The statement, over a source `s` of notices.
macro_rules! notice_sql {
    ($source:expr) => {
        concat!(
            "WITH c AS (SELECT s.*, ",
            unheard!("s.tenant", "$6"),
            " AS quiet FROM ",
            $source,
            "   AS s(tenant, task, session, lease, message)),",
            " noticed AS (SELECT t.tenant_id, t.progress_token, c.quiet, ",
            noticed_columns!(),
            " FROM c JOIN tasks t ON t.tenant_id = c.tenant AND t.task_id = c.task",
            " WHERE (c.session IS NULL OR t.session_id = c.session)",
            " AND t.lease_token = c.lease AND t.status = 'working' AND ",
            live!("t."),
            ")",
            " SELECT n.*, CASE WHEN n.quiet THEN NULL ELSE pg_notify('taskstore_task_changed',",
            "   taskstore_change_payload(n.tenant_id, n.task_id, n.status, n.status_message,",
            "   n.created_at, n.last_updated_at, n.ttl_ms, n.poll_interval_ms, n.session_id,",
            "   n.tool, n.progress_token, NULL)) END::text AS notified",
            " FROM noticed n"
        )
    };
}

/// Tells what can be told in one statement. A batch of one (the usual
/// case at low load) binds plain values: planned once per connection
/// rather than for every batch's arrays.
async fn notify(
    pool: &PgPool,
    quiet: &Quiet,
    notices: &[Notice],
) -> Result<HashMap<(String, String), TaskRow>, sqlx::Error> {
    let noticed = if let [one] = notices {
        sqlx::query_as::<_, NoticedRow>(sql!(notice_sql!(
            "(VALUES ($1::text, $2::text, $3::text, $4::text, $5::text))"
        )))
        .bind(&one.tenant)
        .bind(&one.task_id)
        .bind(&one.session)
        .bind(&one.lease)
        .bind(&one.message)
        .bind(quiet.me())
        .fetch_all(pool)
        .await?
    } else {
        let text = |f: fn(&Notice) -> Option<String>| notices.iter().map(f).collect::<Vec<_>>();
        sqlx::query_as::<_, NoticedRow>(sql!(notice_sql!(
            "unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[])"
        )))
        .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
        .bind(text(|n| Some(n.tenant.clone())))
        .bind(text(|n| Some(n.task_id.clone())))
        .bind(text(|n| n.session.clone()))
        .bind(text(|n| Some(n.lease.clone())))
        .bind(text(|n| n.message.clone()))
        .bind(quiet.me())
        .fetch_all(pool)
        .await?
    };
    // Before the replies, as for a written change.
    for row in noticed.iter().filter(|row| row.quiet) {
        quiet.tell(
            &row.tenant_id,
            &row.task,
            row.progress_token.as_deref(),
            Reach::Everyone,
        );
    }
    Ok(noticed
        .into_iter()
        .map(|row| ((row.tenant_id, row.task.task_id().to_owned()), row.task))
        .collect())
}
