//! The dashboard's reads on PostgreSQL ([`TaskInsights`]), bounded three
//! ways so that a browser cannot starve the API:
//!
//! - a pool of their own, [`INSIGHTS_CONNECTIONS`] connections opened on
//!   first use: however many dashboards ask, the API's pool is untouched;
//! - every read runs in a read-only transaction whose statements stop after
//!   [`INSIGHTS_STATEMENT_TIMEOUT`] (`SET LOCAL statement_timeout`), which
//!   is UNAVAILABLE, not INTERNAL (`error::bounded_read_error`);
//! - a search examines at most [`crate::domain::SEARCH_SCAN_LIMIT`] tasks
//!   for a page (`search`).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgArguments, PgPoolOptions, PgRow};
use sqlx::query::QueryAs;
use sqlx::{FromRow, PgPool, Postgres, Transaction};

use super::error::bounded_read_error;
use super::questions::{QuestionRow, question_columns};
use super::rows::{TaskRow, task_columns};
use crate::domain::{
    ACTIVITY_SAMPLE, Activity, ActivitySample, MAX_SESSIONS, MAX_WAITING_QUESTIONS, Overview,
    OverviewCounts, OverviewWindow, SearchPage, SearchResults, SessionId, SessionSummary,
    TaskDetails, TaskId, TaskSearch, TaskStatus, TenantId, ToolName, WaitingQuestion,
    order_sessions,
};
use crate::error::StoreError;
use crate::store::TaskInsights;
use crate::store::statements::sql;

/// Connections the dashboard's reads may hold at once.
pub const INSIGHTS_CONNECTIONS: u32 = 2;
/// How long one statement of theirs may run.
pub const INSIGHTS_STATEMENT_TIMEOUT: Duration = Duration::from_secs(2);
/// Begins a read: one snapshot for all its statements (a search's page and
/// where its scan ended agree), each stopped after
/// [`INSIGHTS_STATEMENT_TIMEOUT`].
const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; \
                          SET LOCAL statement_timeout = '2s'";

/// The dashboard's reads, on a pool of their own to the store's database.
#[derive(Debug, Clone)]
pub struct PgInsights {
    pool: PgPool,
}

impl PgInsights {
    /// Reads on the database `api_pool` connects to (same options, so the
    /// same schema), through a pool of [`INSIGHTS_CONNECTIONS`] that
    /// connects on first use.
    pub fn new(api_pool: &PgPool) -> Self {
        let options = api_pool.connect_options().as_ref().clone();
        let pool = PgPoolOptions::new()
            .max_connections(INSIGHTS_CONNECTIONS)
            .acquire_timeout(INSIGHTS_STATEMENT_TIMEOUT)
            .test_before_acquire(false)
            // Every read planned with its values: they are few, scan ranges
            // whose size depends on the values (a time window, a tool), and
            // a plan cached on a small table would stay as it grows
            // (plans.rs). A SET rather than a startup parameter, which
            // PgBouncer refuses.
            .after_connect(|conn, _| {
                Box::pin(async move {
                    sqlx::query(sql!("SET plan_cache_mode = force_custom_plan"))
                        .execute(conn)
                        .await
                        .map(|_| ())
                })
            })
            .connect_lazy_with(options);
        Self { pool }
    }

    /// Their own pool (closed with the service's).
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub(super) async fn begin(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        super::transaction::begin(&self.pool, Some(BEGIN_READ))
            .await
            .map_err(bounded_read_error)
    }

    /// The rows of one bounded read, in a snapshot of its own.
    async fn read_all<'q, R>(
        &self,
        query: QueryAs<'q, Postgres, R, PgArguments>,
    ) -> Result<Vec<R>, StoreError>
    where
        R: for<'r> FromRow<'r, PgRow> + Send + Unpin,
    {
        let mut tx = self.begin().await?;
        let rows = query
            .fetch_all(&mut *tx)
            .await
            .map_err(bounded_read_error)?;
        Self::finish(tx).await?;
        Ok(rows)
    }

    /// Ends a bounded read (a commit: nothing was written).
    pub(super) async fn finish(tx: Transaction<'static, Postgres>) -> Result<(), StoreError> {
        super::transaction::commit(tx)
            .await
            .map_err(bounded_read_error)
    }
}

#[derive(sqlx::FromRow)]
struct WaitingRow {
    #[sqlx(flatten)]
    task: TaskRow,
    #[sqlx(flatten)]
    question: QuestionRow,
}

pub(super) fn corrupt(what: &str) -> StoreError {
    tracing::error!(what, "corrupt row in a dashboard query");
    StoreError::Internal("corrupt task row".to_owned())
}

fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

#[async_trait]
impl TaskInsights for PgInsights {
    async fn search_tasks(
        &self,
        tenant: &TenantId,
        search: &TaskSearch,
        page: &SearchPage,
    ) -> Result<SearchResults, StoreError> {
        self.search(tenant, search, page).await
    }

    async fn overview(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<Overview, StoreError> {
        let mut counts = OverviewCounts::new(now);
        let window = counts.window();
        let mut tx = self.begin().await?;
        let by_status: Vec<(String, i64)> = sqlx::query_as(sql!(concat!(
            "SELECT status, count(*) FROM tasks WHERE tenant_id = $1 AND ",
            live!(),
            " GROUP BY status"
        )))
        .bind(tenant.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        for (status, n) in by_status {
            let status: TaskStatus = status.parse().map_err(|_| corrupt("status"))?;
            counts.add_status(status, count(n));
        }
        let open: i64 = sqlx::query_scalar(sql!(concat!(
            "SELECT count(*) FROM task_input_requests q",
            " JOIN tasks t ON t.tenant_id = q.tenant_id AND t.task_id = q.task_id",
            " WHERE q.tenant_id = $1 AND q.answer_json IS NULL",
            " AND ",
            open!("t."),
            " AND ",
            live!("t.")
        )))
        .bind(tenant.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        counts.add_open_questions(count(open));
        let failures: Vec<(Option<String>, i64)> = sqlx::query_as(sql!(concat!(
            "SELECT tool, count(*) FROM tasks WHERE tenant_id = $1 AND ",
            live!(),
            " AND status = 'failed' AND last_updated_at >= $2 GROUP BY tool"
        )))
        .bind(tenant.as_str())
        .bind(window.failures_from)
        .fetch_all(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        for (tool, n) in failures {
            let tool = tool
                .map(|t| ToolName::parse(&t).map_err(|_| corrupt("tool")))
                .transpose()?;
            counts.add_failures(tool, count(n));
        }
        // Minutes since the epoch: the same buckets whatever the session's
        // time zone, and the same as `domain::epoch_minute`.
        let minutes: Vec<(i64, i64, i64)> = sqlx::query_as(sql!(concat!(
            "SELECT minute, sum(created)::bigint, sum(finished)::bigint FROM (",
            " SELECT floor(extract(epoch FROM created_at) / 60)::bigint AS minute,",
            "  1 AS created, 0 AS finished",
            " FROM tasks WHERE tenant_id = $1 AND ",
            live!(),
            " AND created_at >= $2 AND created_at < $3",
            " UNION ALL",
            " SELECT floor(extract(epoch FROM last_updated_at) / 60)::bigint, 0, 1",
            " FROM tasks WHERE tenant_id = $1 AND ",
            live!(),
            " AND status IN ('completed', 'failed', 'cancelled')",
            " AND last_updated_at >= $2 AND last_updated_at < $3",
            ") m GROUP BY minute"
        )))
        .bind(tenant.as_str())
        .bind(window.minutes_from)
        .bind(window.minutes_until)
        .fetch_all(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        for (minute, created, finished) in minutes {
            counts.add_created(minute, count(created));
            counts.add_finished(minute, count(finished));
        }
        PgInsights::finish(tx).await?;
        Ok(counts.finish())
    }

    async fn tool_activity(
        &self,
        tenant: &TenantId,
        now: DateTime<Utc>,
    ) -> Result<Activity, StoreError> {
        let since = OverviewWindow::at(now).failures_from;
        let mut tx = self.begin().await?;
        // One more than the sample: whether there were more.
        let rows: Vec<(DateTime<Utc>, Option<String>, String, i64)> = sqlx::query_as(sql!(concat!(
            "SELECT last_updated_at, tool, status,",
            " greatest(0, floor(extract(epoch FROM last_updated_at - created_at) * 1000))::bigint",
            " FROM tasks WHERE tenant_id = $1 AND ",
            live!(),
            " AND status IN ('completed', 'failed', 'cancelled') AND last_updated_at >= $2",
            " ORDER BY last_updated_at DESC LIMIT $3"
        )))
        .bind(tenant.as_str())
        .bind(since)
        .bind(i64::from(ACTIVITY_SAMPLE) + 1)
        .fetch_all(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        PgInsights::finish(tx).await?;
        let more = rows.len() > ACTIVITY_SAMPLE as usize;
        let mut sample = ActivitySample::default();
        for (ended_at, tool, status, duration_ms) in rows {
            let tool = tool
                .map(|t| ToolName::parse(&t).map_err(|_| corrupt("tool")))
                .transpose()?;
            let status: TaskStatus = status.parse().map_err(|_| corrupt("status"))?;
            sample.add(
                ended_at,
                tool,
                status,
                u64::try_from(duration_ms).unwrap_or(0),
            );
        }
        Ok(sample.finish(more))
    }

    async fn waiting_questions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<WaitingQuestion>, StoreError> {
        let limit = limit.min(MAX_WAITING_QUESTIONS);
        let rows: Vec<WaitingRow> = self
            .read_all(
                sqlx::query_as(sql!(concat!(
                    "SELECT ",
                    task_columns!(),
                    ", ",
                    question_columns!(),
                    " FROM (SELECT task_id, ",
                    question_columns!(),
                    "  FROM task_input_requests WHERE tenant_id = $1 AND answer_json IS NULL) q",
                    " JOIN (SELECT ",
                    task_columns!(),
                    "  FROM tasks WHERE tenant_id = $1 AND ",
                    live!(),
                    " AND ",
                    open!(),
                    ") t USING (task_id)",
                    " ORDER BY asked_at, task_id, request_key COLLATE \"C\" LIMIT $2"
                )))
                .bind(tenant.as_str())
                .bind(i64::from(limit)),
            )
            .await?;
        rows.into_iter()
            .map(|row| {
                Ok(WaitingQuestion {
                    task: row.task.into_task()?,
                    question: row.question.into_question()?,
                })
            })
            .collect()
    }

    async fn task_details(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
    ) -> Result<TaskDetails, StoreError> {
        self.details(tenant, task_id).await
    }

    async fn sessions(
        &self,
        tenant: &TenantId,
        limit: u32,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let limit = limit.min(MAX_SESSIONS);
        let rows: Vec<(String, i64, i64, DateTime<Utc>)> = self
            .read_all(
                sqlx::query_as(sql!(concat!(
                    "SELECT session_id, count(*),",
                    " count(*) FILTER (WHERE ",
                    open!(),
                    "),",
                    " max(created_at)",
                    " FROM tasks WHERE tenant_id = $1 AND session_id IS NOT NULL AND ",
                    live!(),
                    " GROUP BY session_id ORDER BY max(created_at) DESC, session_id LIMIT $2"
                )))
                .bind(tenant.as_str())
                .bind(i64::from(limit)),
            )
            .await?;
        let mut sessions = rows
            .into_iter()
            .map(|(session, tasks, unfinished, last_created_at)| {
                Ok(SessionSummary {
                    session: SessionId::parse(&session, usize::MAX)
                        .map_err(|_| corrupt("session id"))?,
                    tasks: count(tasks),
                    unfinished: count(unfinished),
                    last_created_at,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // The database sorted by bytes; the one order is the domain's.
        order_sessions(&mut sessions);
        Ok(sessions)
    }
}

/// The store answers the dashboard through its [`PgInsights`].
impl crate::store::InsightsSource for super::PgTaskStore {
    fn insights_reader(store: &Arc<Self>) -> Arc<dyn TaskInsights> {
        Arc::new(store.insights().clone())
    }
}
