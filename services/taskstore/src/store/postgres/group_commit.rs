//! Group commit for CreateTask: concurrent creates queue to one writer task,
//! which inserts everything that is waiting (tasks and their outbox jobs) as
//! one multi-row statement in one transaction, then answers each caller and
//! hands the jobs to this replica's relay (`handoff`). Under load many
//! creates share one commit (one fsync); at rest a create costs what a single
//! insert costs. Every reply still comes after its row is durably committed.

use std::collections::HashMap;

use sqlx::PgPool;
use tokio::sync::mpsc;

use super::handoff::{FreshJob, FreshJobs, HANDOFF_GRACE};
use super::rows::{TaskRow, task_columns};
use crate::store::statements::sql;

/// Most creates per statement.
const MAX_BATCH: usize = 512;

/// One task to insert.
#[derive(Debug, Clone)]
pub(super) struct NewRow {
    pub tenant: String,
    pub task_id: String,
    pub session: Option<String>,
    pub request_id_json: String,
    pub request_json: String,
    pub ttl_ms: Option<i64>,
    pub poll_ms: i64,
    /// The tool the task runs (dispatched or not).
    pub tool: Option<String>,
    /// Set only for a dispatched task.
    pub max_attempts: Option<i32>,
    /// The trace the task was created in.
    pub trace_context: Option<String>,
    /// The creating request's progress token (JSON text).
    pub progress_token: Option<String>,
    /// The create's idempotency key (never set on a batched create: a keyed
    /// create is looked up first, in its own transaction).
    pub idempotency_key: Option<String>,
    /// A dispatched task that starts later: when (its job is due then, and
    /// left to the outbox rather than handed to the relay).
    pub starts_at: Option<chrono::DateTime<chrono::Utc>>,
    /// Its first status message (a later start says when).
    pub status_message: Option<String>,
    /// Its tool's retry policy (`RetryPolicy::to_stored`; `None`: the
    /// service's).
    pub retry_policy: Option<String>,
    /// Its dispatch priority (0 for a task nobody dispatches).
    pub priority: i16,
    /// Its key's concurrency limit (`None`: its tool declares none): its
    /// job is left to the dispatch decision, which counts the key's slots.
    pub limit: Option<(String, i32)>,
    /// Its key's rate (key, starts, window in milliseconds): its job is
    /// left to the decision too.
    pub rate: Option<(String, i32, i64)>,
    /// Its fairness key within its tenant (`None`: its tool declares none).
    pub fairness: Option<String>,
}

/// One create waiting for its batch; no row in the reply when a live task
/// already has the id.
pub(super) type PendingCreate = super::batch_writer::Pending<NewRow, TaskRow>;

#[derive(sqlx::FromRow)]
struct CreatedRow {
    tenant_id: String,
    #[sqlx(flatten)]
    task: TaskRow,
    /// A dispatched task's job: its outbox row and generation.
    job_id: Option<i64>,
    job_generation: Option<i64>,
    job_tool: Option<String>,
    job_trace_context: Option<String>,
}

/// What one statement created: the tasks, by (tenant, task id), and the
/// jobs of the dispatched ones.
pub(super) struct Created {
    pub rows: HashMap<(String, String), TaskRow>,
    pub jobs: Vec<FreshJob>,
    /// Jobs were left to the dispatch decision (limited ones): the relay
    /// should look.
    pub to_decide: bool,
}

/// Starts the writer, which hands the jobs it commits to `fresh`; it ends
/// when every sender is dropped.
pub(super) fn spawn(pool: PgPool, fresh: FreshJobs) -> mpsc::Sender<PendingCreate> {
    super::batch_writer::spawn(MAX_BATCH, split_repeated_ids, move |batch| {
        let pool = pool.clone();
        let fresh = fresh.clone();
        async move { insert_batch(&pool, &fresh, batch).await }
    })
}

/// One row per id per statement (PostgreSQL refuses an upsert that touches a
/// row twice): a repeated caller-supplied id waits for the next batch, where
/// it finds the first one's row.
fn split_repeated_ids(batch: Vec<PendingCreate>) -> (Vec<PendingCreate>, Vec<PendingCreate>) {
    let mut seen = std::collections::HashSet::new();
    batch
        .into_iter()
        .partition(|p| seen.insert((p.request.tenant.clone(), p.request.task_id.clone())))
}

async fn insert_batch(pool: &PgPool, fresh: &FreshJobs, batch: Vec<PendingCreate>) {
    let rows: Vec<NewRow> = batch.iter().map(|p| p.request.clone()).collect();
    let outcome = insert_rows(pool, &rows).await.map(|created| {
        fresh.push(created.jobs, created.to_decide);
        created.rows
    });
    super::batch_writer::answer(batch, outcome, |row| (row.tenant, row.task_id));
}

/// Inserts tasks (and the outbox jobs of dispatched ones, due after the
/// handoff's grace) in one statement; returns what it created. A live task
/// with the id is
/// left alone (no row comes back for it); an expired one is replaced,
/// continuing its generation count so that jobs still queued for the old task
/// can never claim the new one. Ids must be distinct within `rows`.
pub(super) async fn insert_rows<'e>(
    executor: impl sqlx::PgExecutor<'e>,
    rows: &[NewRow],
) -> Result<Created, sqlx::Error> {
    let column = |f: fn(&NewRow) -> Option<String>| rows.iter().map(f).collect::<Vec<_>>();
    let limited_now = rows
        .iter()
        .any(|r| (r.limit.is_some() || r.rate.is_some()) && r.starts_at.is_none());
    // A job that starts later waits in the outbox until it is due; a
    // limited one waits there for the decision.
    let later: std::collections::HashSet<(&str, &str)> = rows
        .iter()
        .filter(|r| r.starts_at.is_some() || r.limit.is_some() || r.rate.is_some())
        .map(|r| (r.tenant.as_str(), r.task_id.as_str()))
        .collect();

    let tenants = column(|r| Some(r.tenant.clone()));
    let ids = column(|r| Some(r.task_id.clone()));
    let sessions = column(|r| r.session.clone());
    let request_ids = column(|r| Some(r.request_id_json.clone()));
    let requests = column(|r| Some(r.request_json.clone()));
    let tools = column(|r| r.tool.clone());
    let traces = column(|r| r.trace_context.clone());
    let tokens = column(|r| r.progress_token.clone());
    let keys = column(|r| r.idempotency_key.clone());
    let messages = column(|r| r.status_message.clone());
    let retries = column(|r| r.retry_policy.clone());
    let priorities: Vec<i16> = rows.iter().map(|r| r.priority).collect();
    let limit_keys = column(|r| r.limit.as_ref().map(|(key, _)| key.clone()));
    let rate_keys = column(|r| r.rate.as_ref().map(|(key, _, _)| key.clone()));
    let rate_starts: Vec<Option<i32>> = rows.iter().map(|r| r.rate.as_ref().map(|r| r.1)).collect();
    let rate_pers: Vec<Option<i64>> = rows.iter().map(|r| r.rate.as_ref().map(|r| r.2)).collect();
    let fairness_keys = column(|r| r.fairness.clone());
    let limit_maxes: Vec<Option<i32>> =
        rows.iter().map(|r| r.limit.as_ref().map(|l| l.1)).collect();
    let starts: Vec<Option<chrono::DateTime<chrono::Utc>>> =
        rows.iter().map(|r| r.starts_at).collect();
    let ttls: Vec<Option<i64>> = rows.iter().map(|r| r.ttl_ms).collect();
    let polls: Vec<i64> = rows.iter().map(|r| r.poll_ms).collect();
    let attempts: Vec<Option<i32>> = rows.iter().map(|r| r.max_attempts).collect();
    let created = sqlx::query_as::<_, CreatedRow>(sql!(concat!(
        "WITH input AS (",
        " SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],",
        "                      $6::bigint[], $7::bigint[], $8::text[], $9::int[], $10::text[],",
        "                      $11::text[], $13::text[], $14::text[], $15::timestamptz[],",
        "                      $16::text[], $17::smallint[], $18::text[], $19::int[],",
        "                      $20::text[], $21::int[], $22::bigint[], $23::text[])",
        "   AS i(tenant_id, task_id, session_id, request_id_json, request_json, ttl_ms,",
        "        poll_interval_ms, tool, max_attempts, trace_context, progress_token,",
        "        idempotency_key, status_message, starts_at, retry_policy, priority,",
        "        limit_key, limit_max, rate_key, rate_starts, rate_per_ms, fairness_key)),",
        " task AS (",
        " INSERT INTO tasks (tenant_id, task_id, session_id, status, status_message,",
        "  request_id_json, request_json,",
        "  created_at, last_updated_at, ttl_ms, expires_at, poll_interval_ms,",
        "  tool, max_attempts, dispatch_generation, trace_context, progress_token,",
        "  idempotency_key, retry_policy, priority, limit_key, limit_max, rate_key, rate_starts,",
        "  rate_per_ms, fairness_key)",
        " SELECT tenant_id, task_id, session_id, 'working', status_message,",
        "  request_id_json, request_json,",
        "  now(), now(), ttl_ms, now() + ttl_ms * interval '1 millisecond', poll_interval_ms,",
        "  tool, max_attempts, 1, trace_context, progress_token, idempotency_key, retry_policy,",
        "  priority, limit_key, limit_max, rate_key, rate_starts, rate_per_ms, fairness_key",
        " FROM input",
        " ON CONFLICT (tenant_id, task_id) DO UPDATE SET",
        "   session_id = EXCLUDED.session_id, status = EXCLUDED.status,",
        "   status_message = EXCLUDED.status_message,",
        "   request_id_json = EXCLUDED.request_id_json, request_json = EXCLUDED.request_json,",
        "   result_json = NULL, created_at = EXCLUDED.created_at,",
        "   last_updated_at = EXCLUDED.last_updated_at, ttl_ms = EXCLUDED.ttl_ms,",
        "   expires_at = EXCLUDED.expires_at, poll_interval_ms = EXCLUDED.poll_interval_ms,",
        "   tool = EXCLUDED.tool, max_attempts = EXCLUDED.max_attempts, attempt = 0,",
        "   trace_context = EXCLUDED.trace_context, progress_token = EXCLUDED.progress_token,",
        "   idempotency_key = EXCLUDED.idempotency_key, retry_policy = EXCLUDED.retry_policy,",
        "   priority = EXCLUDED.priority, limit_key = EXCLUDED.limit_key,",
        "   limit_max = EXCLUDED.limit_max, rate_key = EXCLUDED.rate_key,",
        "   rate_starts = EXCLUDED.rate_starts, rate_per_ms = EXCLUDED.rate_per_ms,",
        "   fairness_key = EXCLUDED.fairness_key,",
        "   dispatch_generation = tasks.dispatch_generation + 1,",
        "   lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, lease_session = NULL,",
        "   parked_at = NULL,",
        "   attempt_history = NULL",
        " WHERE tasks.expires_at <= now()",
        // xmax is set on a row the conflict updated: an expired task's id
        // reused, whose questions go with the old task.
        " RETURNING *, xmax <> 0 AS reused),",
        " forgotten AS (",
        " DELETE FROM task_input_requests q USING task",
        " WHERE task.reused AND q.tenant_id = task.tenant_id AND q.task_id = task.task_id),",
        " job AS (",
        " INSERT INTO dispatch_outbox (tenant_id, task_id, generation, tool, priority,",
        "  fairness_key, available_at, ready)",
        " SELECT t.tenant_id, t.task_id, t.dispatch_generation, t.tool, t.priority,",
        "  COALESCE(t.fairness_key, ''),",
        "  COALESCE(i.starts_at, CASE WHEN t.limit_key IS NULL AND t.rate_key IS NULL",
        "   THEN now() + $12 * interval '1 millisecond' ELSE now() END),",
        "  (t.limit_key IS NOT NULL OR t.rate_key IS NOT NULL) AND i.starts_at IS NULL",
        " FROM task t JOIN input i ON i.tenant_id = t.tenant_id AND i.task_id = t.task_id",
        " WHERE t.max_attempts IS NOT NULL",
        " RETURNING id AS job_id, tenant_id AS job_tenant, task_id AS job_task,",
        "  generation AS job_generation, tool AS job_tool)",
        " SELECT task.tenant_id, ",
        task_columns!(),
        ", job.job_id, job.job_generation, job.job_tool,",
        " task.trace_context AS job_trace_context",
        " FROM task LEFT JOIN job ON job.job_tenant = task.tenant_id AND job.job_task = task.task_id"
    )))
    .bind(&tenants)
    .bind(&ids)
    .bind(&sessions)
    .bind(&request_ids)
    .bind(&requests)
    .bind(&ttls)
    .bind(&polls)
    .bind(&tools)
    .bind(&attempts)
    .bind(&traces)
    .bind(&tokens)
    .bind(i64::try_from(HANDOFF_GRACE.as_millis()).unwrap_or(i64::MAX))
    .bind(&keys)
    .bind(&messages)
    .bind(&starts)
    .bind(&retries)
    .bind(&priorities)
    .bind(&limit_keys)
    .bind(&limit_maxes)
    .bind(&rate_keys)
    .bind(&rate_starts)
    .bind(&rate_pers)
    .bind(&fairness_keys)
    .fetch_all(executor)
    .await?;
    let committed_at = std::time::Instant::now();
    let mut jobs = Vec::new();
    let mut rows = HashMap::with_capacity(created.len());
    for row in created {
        let starts_later = later.contains(&(row.tenant_id.as_str(), row.task.task_id()));
        if let (Some(outbox_id), Some(generation), Some(tool), false) =
            (row.job_id, row.job_generation, row.job_tool, starts_later)
        {
            jobs.push(FreshJob::of_row(
                outbox_id,
                row.tenant_id.clone(),
                row.task.task_id().to_owned(),
                generation,
                tool,
                row.job_trace_context,
                committed_at,
            ));
        }
        rows.insert((row.tenant_id, row.task.task_id().to_owned()), row.task);
    }
    let to_decide = limited_now && !rows.is_empty();
    Ok(Created {
        rows,
        jobs,
        to_decide,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(tenant: &str, id: &str) -> PendingCreate {
        let (reply, _) = tokio::sync::oneshot::channel();
        let row = NewRow {
            fairness: None,
            rate: None,
            limit: None,
            tenant: tenant.into(),
            task_id: id.into(),
            session: None,
            request_id_json: "1".into(),
            request_json: "{}".into(),
            ttl_ms: None,
            poll_ms: 1000,
            tool: None,
            max_attempts: None,
            trace_context: None,
            progress_token: None,
            idempotency_key: None,
            starts_at: None,
            status_message: None,
            retry_policy: None,
            priority: 0,
        };
        PendingCreate {
            request: row,
            reply,
        }
    }

    #[test]
    fn a_repeated_id_waits_for_the_next_batch() {
        let batch = vec![
            pending("a", "x"),
            pending("a", "y"),
            pending("a", "x"),
            pending("b", "x"),
            pending("a", "x"),
        ];
        let (now, later) = split_repeated_ids(batch);
        let keys = |v: &[PendingCreate]| {
            v.iter()
                .map(|p| format!("{}/{}", p.request.tenant, p.request.task_id))
                .collect::<Vec<_>>()
        };
        assert_eq!(keys(&now), ["a/x", "a/y", "b/x"]);
        assert_eq!(keys(&later), ["a/x", "a/x"]);
        let (again, rest) = split_repeated_ids(later);
        assert_eq!(
            (keys(&again), keys(&rest)),
            (vec!["a/x".to_owned()], vec!["a/x".to_owned()])
        );
    }
}
