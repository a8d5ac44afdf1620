//! The PostgreSQL backend.
//!
//! Every operation is one statement (or one short transaction when quotas are
//! on), so its outcome is decided by PostgreSQL's row locks, not by a check in
//! this process followed by a write: two replicas, or twenty concurrent calls,
//! can never both move a task out of a non-terminal status. Timestamps come
//! from the database clock, so replicas with skewed clocks agree on expiry.

mod error;
mod listener;
mod rows;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, QueryBuilder};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

pub(crate) use self::error::is_unavailable;
use self::error::store_error;
use self::rows::{TaskRow, TaskWithResultRow, stored_json, task_columns};
use super::changes::{ChangeFeed, wait_for_result, watch};
use super::{StoreConfig, TaskStore, TaskWatch, already_terminal, no_result, quota_reached};
use crate::domain::{
    CursorCodec, LeaseToken, NewResult, NewTask, PageRequest, Scope, StatusUpdate, Task, TaskId,
    TaskPage, TaskResult, TaskStatus,
};
use crate::error::StoreError;

/// The embedded migrations under `migrations/postgres`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// Applies pending migrations. Safe with several replicas starting at once:
/// sqlx holds a PostgreSQL advisory lock while it migrates.
pub async fn migrate(pool: &PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    MIGRATOR.run(pool).await
}

/// Connection pool settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSettings {
    pub max_connections: u32,
    /// How long an operation waits for a connection before it fails with
    /// UNAVAILABLE: the bound on how long an RPC hangs while the database is
    /// down.
    pub acquire_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        Self {
            max_connections: 10,
            acquire_timeout: Duration::from_secs(5),
        }
    }
}

/// A pool that connects on first use, so the service starts (and reports
/// itself not ready) while the database is still down, and reconnects by
/// itself after the database restarts.
pub fn lazy_pool(options: PgConnectOptions, settings: PoolSettings) -> PgPool {
    PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        // No ping on every checkout: it doubled the round trips of every
        // read (GetTask went from 0.7x to 0.9-1.1x of pgbench without it;
        // BENCHMARKS.md). The cost: after a database restart each stale
        // pooled connection fails one operation with UNAVAILABLE, which is
        // retryable, and is then replaced.
        .test_before_acquire(false)
        .connect_lazy_with(options)
}

const CURSOR_KEY_NAME: &str = "cursor_hmac_key";

/// The not-expired predicate, evaluated against the database clock.
macro_rules! live {
    () => {
        "(expires_at IS NULL OR expires_at > now())"
    };
}

/// `tenant_id = $1 AND task_id = $2`, restricted to the session in `$3` when
/// it is not NULL, and to unexpired tasks.
macro_rules! visible_task {
    () => {
        concat!(
            "tenant_id = $1 AND task_id = $2 AND ($3::text IS NULL OR session_id = $3) AND ",
            live!()
        )
    };
}

// Declared after the SQL macros above, which they use.
mod execution;
mod group_commit;

/// The PostgreSQL [`TaskStore`].
#[derive(Debug, Clone)]
pub struct PgTaskStore {
    pool: PgPool,
    config: StoreConfig,
    cursors: CursorCodec,
    changes: ChangeFeed,
    outbox: Arc<Notify>,
    /// Stops the change feed listener when the last clone is dropped.
    _listener: Arc<DropGuard>,
    /// Creates without quotas go through the group-commit writer.
    creates: tokio::sync::mpsc::Sender<group_commit::PendingCreate>,
}

impl PgTaskStore {
    /// Opens the store on a migrated database.
    pub async fn open(pool: PgPool, config: StoreConfig) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let cursors = CursorCodec::new(shared_cursor_key(&pool).await?);
        let changes = ChangeFeed::default();
        let outbox = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        listener::spawn(pool.clone(), changes.clone(), outbox.clone(), stop.clone());
        let creates = group_commit::spawn(pool.clone());
        Ok(Self {
            pool,
            config,
            cursors,
            changes,
            outbox,
            _listener: Arc::new(stop.drop_guard()),
            creates,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Inserts a task; ALREADY_EXISTS when a live task has its id.
    async fn insert(&self, scope: &Scope, task: NewTask) -> Result<TaskRow, StoreError> {
        let task_id = super::task_id_or_new(task.task_id.clone())?;
        let ttl_ms = self
            .config
            .ttl
            .effective(task.ttl)
            .map(|ttl| ttl.as_millis_i64());
        let poll_ms = i64::try_from(self.config.poll_interval.as_millis()).unwrap_or(i64::MAX);
        let attempts = match &task.dispatch {
            Some(dispatch) => {
                let attempts = self.config.dispatch_attempts(dispatch.max_attempts)?;
                Some(i32::try_from(attempts).unwrap_or(i32::MAX))
            }
            None => None,
        };

        let new_row = group_commit::NewRow {
            tenant: scope.tenant.as_str().to_owned(),
            task_id: task_id.as_str().to_owned(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
            request_id_json: task.request_id.as_str().to_owned(),
            request_json: task.request.as_str().to_owned(),
            ttl_ms,
            poll_ms,
            tool: task.dispatch.as_ref().map(|d| d.tool.as_str().to_owned()),
            max_attempts: attempts,
        };
        let row = if let Some(lock_key) = self.quota_lock_key(scope) {
            // Creates under a quota are serialized (count, then insert), so
            // they cannot share a batch.
            let mut tx = self.pool.begin().await.map_err(store_error)?;
            self.enforce_quotas(&mut tx, scope, lock_key).await?;
            let created = group_commit::insert_rows(&mut *tx, std::slice::from_ref(&new_row))
                .await
                .map_err(store_error)?;
            tx.commit().await.map_err(store_error)?;
            created.into_values().next()
        } else {
            let (reply, answer) = tokio::sync::oneshot::channel();
            let pending = group_commit::PendingCreate {
                row: new_row,
                reply,
            };
            let stopped = || StoreError::Unavailable("the store is shutting down".into());
            self.creates.send(pending).await.map_err(|_| stopped())?;
            answer.await.map_err(|_| stopped())??
        };
        row.ok_or_else(|| StoreError::AlreadyExists(task_id.to_string()))
    }

    /// The advisory lock that serializes creates which count against the
    /// same quota, so the count and the insert cannot interleave with another
    /// create's (no check-then-insert race). The tenant lock covers both
    /// quotas; with only a session quota, sessions do not wait for each other.
    fn quota_lock_key(&self, scope: &Scope) -> Option<String> {
        let quotas = self.config.quotas;
        if quotas.max_tasks.is_some() {
            Some(format!("taskstore/quota/{}", scope.tenant.as_str()))
        } else if let (Some(_), Some(session)) = (quotas.max_tasks_per_session, &scope.session) {
            Some(format!(
                "taskstore/quota/{}/{}/{}",
                scope.tenant.as_str().len(),
                scope.tenant.as_str(),
                session.as_str()
            ))
        } else {
            None
        }
    }

    async fn enforce_quotas(
        &self,
        tx: &mut sqlx::Transaction<'_, Postgres>,
        scope: &Scope,
        lock_key: String,
    ) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(lock_key)
            .execute(&mut **tx)
            .await
            .map_err(store_error)?;

        if let Some(max) = self.config.quotas.max_tasks {
            let count: i64 = sqlx::query_scalar(concat!(
                "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND ",
                live!()
            ))
            .bind(scope.tenant.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(store_error)?;
            if count_reaches(count, max) {
                return Err(quota_reached("max_tasks", max));
            }
        }
        if let (Some(max), Some(session)) =
            (self.config.quotas.max_tasks_per_session, &scope.session)
        {
            let count: i64 = sqlx::query_scalar(concat!(
                "SELECT count(*) FROM tasks WHERE tenant_id = $1 AND session_id = $2 AND ",
                live!()
            ))
            .bind(scope.tenant.as_str())
            .bind(session.as_str())
            .fetch_one(&mut **tx)
            .await
            .map_err(store_error)?;
            if count_reaches(count, max) {
                return Err(quota_reached("max_tasks_per_session", max));
            }
        }
        Ok(())
    }

    async fn fetch_visible(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskRow, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE ",
            visible_task!()
        );
        self.fetch_visible_as(SQL, scope, task_id).await
    }

    /// Runs `sql`, a SELECT whose parameters are those of `visible_task!`,
    /// and returns its one row, or NOT_FOUND.
    async fn fetch_visible_as<R>(
        &self,
        sql: &'static str,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<R, StoreError>
    where
        R: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
    {
        sqlx::query_as::<_, R>(sql)
            .bind(scope.tenant.as_str())
            .bind(task_id.as_str())
            .bind(scope.session.as_ref().map(|s| s.as_str()))
            .fetch_optional(&self.pool)
            .await
            .map_err(store_error)?
            .ok_or(StoreError::NotFound)
    }

    /// Moves a visible, non-terminal task to `status` in one statement. `None`
    /// when no such task exists or it is terminal already. Reaching a terminal
    /// status re-arms the expiry to at least `ttl` from now.
    async fn transition(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        status: TaskStatus,
        message: Option<&str>,
        result: Option<&str>,
        fence: Option<&LeaseToken>,
    ) -> Result<Option<TaskRow>, StoreError> {
        sqlx::query_as::<_, TaskRow>(concat!(
            "UPDATE tasks SET status = $4, status_message = $5, result_json = $6,",
            " last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond'),",
            " expires_at = CASE WHEN $7 THEN GREATEST(expires_at, now() + ttl_ms * interval '1 millisecond')",
            "                   ELSE expires_at END",
            " WHERE ",
            visible_task!(),
            " AND status IN ('working', 'input_required')",
            " AND ($8::text IS NULL OR lease_token = $8)",
            " RETURNING ",
            task_columns!()
        ))
        .bind(scope.tenant.as_str())
        .bind(task_id.as_str())
        .bind(scope.session.as_ref().map(|s| s.as_str()))
        .bind(status.as_str())
        .bind(message)
        .bind(result)
        .bind(status.is_terminal())
        .bind(fence.map(LeaseToken::as_str))
        .fetch_optional(&self.pool)
        .await
        .map_err(store_error)
    }

    /// Why a transition changed nothing: the task is not visible, it is
    /// terminal (terminal statuses are final, so the answer cannot go
    /// stale), or the caller's lease is no longer the task's.
    async fn refusal(&self, scope: &Scope, task_id: &TaskId) -> StoreError {
        match self.fetch_visible(scope, task_id).await {
            Ok(row) => match row.status() {
                Ok(status) if status.is_terminal() => already_terminal(status),
                Ok(_) => crate::store::execution::messages::lease_lost(),
                Err(err) => err,
            },
            Err(err) => err,
        }
    }

    async fn delete_expired_batch(&self) -> Result<u64, StoreError> {
        // SKIP LOCKED: replicas sweeping at once take disjoint batches.
        let deleted = sqlx::query(
            "WITH doomed AS (
                 SELECT tenant_id, task_id FROM tasks
                 WHERE expires_at <= now()
                 ORDER BY expires_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED)
             DELETE FROM tasks t USING doomed d
             WHERE t.tenant_id = d.tenant_id AND t.task_id = d.task_id",
        )
        .bind(i64::from(self.config.cleanup_batch_size))
        .execute(&self.pool)
        .await
        .map_err(store_error)?
        .rows_affected();
        Ok(deleted)
    }
}

fn count_reaches(count: i64, max: u64) -> bool {
    u64::try_from(count).unwrap_or(0) >= max
}

/// The cursor key every replica shares: the first replica to start creates
/// it, the others read the same row.
async fn shared_cursor_key(pool: &PgPool) -> Result<[u8; CursorCodec::KEY_BYTES], StoreError> {
    let mut candidate = [0u8; CursorCodec::KEY_BYTES];
    getrandom::getrandom(&mut candidate).map_err(|err| {
        tracing::error!(error = %err, "no randomness for the cursor key");
        StoreError::Internal("could not generate the cursor key".to_owned())
    })?;
    sqlx::query(
        "INSERT INTO store_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
    )
    .bind(CURSOR_KEY_NAME)
    .bind(&candidate[..])
    .execute(pool)
    .await
    .map_err(store_error)?;
    let stored: Vec<u8> = sqlx::query_scalar("SELECT value FROM store_secrets WHERE name = $1")
        .bind(CURSOR_KEY_NAME)
        .fetch_one(pool)
        .await
        .map_err(store_error)?;
    stored.try_into().map_err(|_| {
        tracing::error!("stored cursor key has the wrong length");
        StoreError::Internal("corrupt cursor key".to_owned())
    })
}

#[async_trait]
impl TaskStore for PgTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let dispatched = task.dispatch.is_some();
        let task = self.insert(scope, task).await?.into_task()?;
        if dispatched {
            // The local relay need not wait for the NOTIFY round trip.
            self.outbox.notify_one();
        }
        Ok(task)
    }

    async fn get_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        self.fetch_visible(scope, task_id).await?.into_task()
    }

    async fn update_status(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        update: StatusUpdate,
    ) -> Result<Task, StoreError> {
        match self
            .transition(
                scope,
                task_id,
                update.status,
                update.message.as_deref(),
                None,
                update.lease.as_ref(),
            )
            .await?
        {
            Some(row) => row.into_task(),
            None => Err(self.refusal(scope, task_id).await),
        }
    }

    async fn store_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        result: NewResult,
    ) -> Result<Task, StoreError> {
        let status = TaskStatus::from(result.status);
        match self
            .transition(
                scope,
                task_id,
                status,
                result.message.as_deref(),
                Some(result.result.as_str()),
                result.lease.as_ref(),
            )
            .await?
        {
            Some(row) => row.into_task(),
            None => Err(self.refusal(scope, task_id).await),
        }
    }

    async fn get_result(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskResult, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            task_columns!(),
            ", result_json FROM tasks WHERE ",
            visible_task!()
        );
        let row: TaskWithResultRow = self.fetch_visible_as(SQL, scope, task_id).await?;
        let task = row.task.into_task()?;
        match (task.status, row.result_json) {
            (TaskStatus::Completed | TaskStatus::Failed, Some(result)) => Ok(TaskResult {
                task,
                result: stored_json(result)?,
            }),
            (status, _) => Err(no_result(status)),
        }
    }

    async fn list_tasks(&self, scope: &Scope, page: PageRequest) -> Result<TaskPage, StoreError> {
        let after = page
            .cursor
            .as_deref()
            .map(|cursor| self.cursors.decode(scope, cursor))
            .transpose()?;
        let size = self.config.paging.resolve(page.page_size);

        let mut query = QueryBuilder::<Postgres>::new(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = "
        ));
        query.push_bind(scope.tenant.as_str());
        if let Some(session) = &scope.session {
            query.push(" AND session_id = ").push_bind(session.as_str());
        }
        query.push(concat!(" AND ", live!()));
        if let Some(after) = &after {
            query
                .push(" AND (created_at, task_id) > (")
                .push_bind(after.created_at)
                .push(", ")
                .push_bind(after.task_id.as_str())
                .push(")");
        }
        // One extra row tells whether another page follows.
        query
            .push(" ORDER BY created_at, task_id LIMIT ")
            .push_bind(i64::from(size) + 1);
        let mut rows: Vec<TaskRow> = query
            .build_query_as()
            .fetch_all(&self.pool)
            .await
            .map_err(store_error)?;

        let has_more = rows.len() > size as usize;
        rows.truncate(size as usize);
        let next_cursor = match (has_more, rows.last()) {
            (true, Some(last)) => Some(self.cursors.encode(scope, &last.position()?)),
            _ => None,
        };
        let tasks = rows
            .into_iter()
            .map(TaskRow::into_task)
            .collect::<Result<_, _>>()?;
        Ok(TaskPage { tasks, next_cursor })
    }

    async fn cancel_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        match self
            .transition(scope, task_id, TaskStatus::Cancelled, None, None, None)
            .await?
        {
            Some(row) => row.into_task(),
            // Idempotent: a terminal task comes back as it is.
            None => self.fetch_visible(scope, task_id).await?.into_task(),
        }
    }

    async fn watch_task(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskWatch, StoreError> {
        watch(self.clone(), &self.changes, scope.clone(), task_id.clone()).await
    }

    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError> {
        wait_for_result(self, &self.changes, scope, task_id, timeout).await
    }

    async fn cleanup_expired(&self) -> Result<u64, StoreError> {
        let mut total = 0;
        loop {
            let deleted = self.delete_expired_batch().await?;
            total += deleted;
            if deleted < u64::from(self.config.cleanup_batch_size) {
                return Ok(total);
            }
        }
    }
}
