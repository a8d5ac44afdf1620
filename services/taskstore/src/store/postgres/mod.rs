//! The PostgreSQL backend.
//!
//! Every operation is one statement (or one short transaction when quotas are
//! on), so its outcome is decided by PostgreSQL's row locks, not by a check in
//! this process followed by a write: two replicas, or twenty concurrent calls,
//! can never both move a task out of a non-terminal status. Timestamps come
//! from the database clock, so replicas with skewed clocks agree on expiry.

mod error;
mod migrations;
mod rows;

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, DropGuard};

pub use self::connect::unreachable_because;
#[cfg(test)]
pub(crate) use self::dynamic_statements::dynamic_statements;
pub(crate) use self::error::{is_unavailable, store_error};
pub use self::handoff::HANDOFF_GRACE;
pub use self::insights::{INSIGHTS_CONNECTIONS, INSIGHTS_STATEMENT_TIMEOUT, PgInsights};
pub use self::migrations::{MIGRATOR, SchemaState, migrate, schema_state};
use self::rows::{TaskRow, task_columns};
use super::changes::ChangeFeed;
use super::{StoreConfig, already_terminal};
use crate::domain::{CursorCodec, Effects, Fence, Scope, TaskId, TaskStatus};
use crate::error::StoreError;
use crate::store::statements::sql;

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
    let pool = PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        // No ping on every checkout: it doubled the round trips of every
        // read (GetTask went from 0.7x to 0.9-1.1x of pgbench without it;
        // BENCHMARKS.md). The cost: after a database restart each stale
        // pooled connection fails one operation with UNAVAILABLE, which is
        // retryable, and is then replaced.
        .test_before_acquire(false);
    // Plans cached only once the tasks table is large enough for a cached
    // plan to stay right (plans.rs).
    Arc::new(plans::PlanMode::new())
        .install(pool)
        .connect_lazy_with(options)
}

// The SQL conditions every statement shares, declared before the modules
// that use them.
#[macro_use]
mod conditions;
mod advisory;
mod apply;
mod batch_writer;
mod claim_batch;
mod connect;
mod create;
mod dispatch;
mod dispatch_view;
#[cfg(test)]
mod dynamic_statements;
mod execution;
mod feed;
mod governed;
mod group_commit;
mod handoff;
mod held;
mod history;
mod hold;
mod idempotent;
mod insights;
mod listing;
mod operations;
mod plans;
mod progress;
mod progress_notices;
mod questions;
mod read_batch;
mod search;
mod sessions;
mod task_details;
mod task_store;
mod transaction;
mod transition_batch;

/// How long opening the store waits for its change listener to listen.
const LISTENER_READY_WITHIN: Duration = Duration::from_secs(5);

/// The PostgreSQL [`TaskStore`].
#[derive(Debug, Clone)]
pub struct PgTaskStore {
    pool: PgPool,
    config: StoreConfig,
    cursors: CursorCodec,
    changes: ChangeFeed,
    /// The tenants this replica's subscribers follow, registered so that
    /// other replicas notify their changes.
    listeners: feed::ChangeListeners,
    outbox: Arc<Notify>,
    /// Jobs this replica committed, for its relay to publish at once, and
    /// where the relay sends confirmed ones to have their rows deleted.
    fresh: handoff::FreshJobs,
    forget: tokio::sync::mpsc::UnboundedSender<i64>,
    /// Which tools have room or a backlog, as this replica's relay saw it.
    gate: Arc<crate::store::dispatch_gate::DispatchGate>,
    /// Stops the change feed listener and the registrations' renewals
    /// when the last clone is dropped, or at [`Self::leave`].
    _listener: Arc<DropGuard>,
    background: CancellationToken,
    /// Creates without quotas go through the group-commit writer.
    creates: tokio::sync::mpsc::Sender<group_commit::PendingCreate>,
    /// Claims go through theirs, and status changes and results theirs.
    claims: tokio::sync::mpsc::Sender<claim_batch::PendingClaim>,
    changes_writer: tokio::sync::mpsc::Sender<transition_batch::PendingChange>,
    /// Progress told without a write, and what waits to be written.
    notices: tokio::sync::mpsc::Sender<progress_notices::PendingNotice>,
    progress: Arc<progress::ProgressWrites>,
    /// Reads of one task (polls) go through theirs.
    reads: read_batch::Readers,
    /// The dashboard's reads, on a pool of their own.
    insights: PgInsights,
}

impl PgTaskStore {
    /// Opens the store on a migrated database.
    pub async fn open(pool: PgPool, config: StoreConfig) -> Result<Self, StoreError> {
        config
            .validate()
            .map_err(|err| StoreError::InvalidArgument(err.to_string()))?;
        let cursors = CursorCodec::new(connect::shared_cursor_key(&pool).await?);
        connect::warn_when_autovacuum_is_off(&pool).await;
        let changes = ChangeFeed::default();
        let outbox = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let listening = feed::listen(pool.clone(), changes.clone(), stop.clone());
        // Subscribers from the first moment hear every notified change (a
        // listener still connecting later tells them to read again). The
        // database answered just now, so this is one connection's setup.
        let _ = tokio::time::timeout(LISTENER_READY_WITHIN, listening).await;
        let quiet = feed::Quiet::new(feed::new_replica_id().into(), changes.clone());
        let listeners =
            feed::ChangeListeners::start(pool.clone(), quiet.clone(), stop.clone()).await;
        let fresh = handoff::FreshJobs::new(outbox.clone());
        let forget = handoff::spawn_forgetter(pool.clone(), config.execution.republish_after);
        let creates = group_commit::spawn(pool.clone(), fresh.clone());
        let claims = claim_batch::spawn(
            pool.clone(),
            rows::millis(config.execution.lease_duration),
            quiet.clone(),
        );
        let changes_writer = transition_batch::spawn(pool.clone(), quiet.clone());
        let notices = progress_notices::spawn(pool.clone(), quiet);
        let progress = Arc::new(progress::ProgressWrites::default());
        progress::spawn_writer(pool.clone(), Arc::downgrade(&progress), stop.clone());
        let reads = read_batch::Readers::spawn(&pool);
        let insights = PgInsights::new(&pool);
        Ok(Self {
            pool,
            config,
            cursors,
            changes,
            listeners,
            outbox,
            fresh,
            forget,
            gate: Arc::default(),
            background: stop.clone(),
            _listener: Arc::new(stop.drop_guard()),
            creates,
            claims,
            changes_writer,
            notices,
            progress,
            reads,
            insights,
        })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Whether this replica skips the notification of a claim or status
    /// change whose tenant no other replica follows (migration 0015); false
    /// while a replica of an older version may be listening.
    pub fn quiet_changes_allowed(&self) -> bool {
        self.listeners.quiet_allowed()
    }

    /// On the way out: the change feed and its renewals stop, and other
    /// replicas need not notify this one any more.
    pub async fn leave(&self) {
        self.background.cancel();
        self.listeners.leave().await;
    }

    /// Whether a session that may be an older version's change listener is
    /// connected to the database (what [`Self::quiet_changes_allowed`]
    /// follows, checked every few seconds).
    pub async fn older_change_listeners_connected(&self) -> Result<bool, StoreError> {
        self.listeners.older_listeners_connected().await
    }

    /// The dashboard's reads ([`crate::store::TaskInsights`], which this
    /// store implements through them).
    pub fn insights(&self) -> &PgInsights {
        &self.insights
    }

    /// A read-write transaction on the store's pool (cancel-safe:
    /// [`transaction`]).
    async fn begin(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        transaction::begin(&self.pool, None)
            .await
            .map_err(store_error)
    }

    async fn fetch_visible(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskRow, StoreError> {
        const SQL: &str = select_visible!("");
        self.fetch_visible_as(sql!(SQL), scope, task_id).await
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

    /// Applies a report's effects (`Effects::of_report`) to a visible,
    /// non-terminal task that `fence` admits, in a batch with the other
    /// reports waiting now (`transition_batch`: one statement, one commit for
    /// all of them). `None` when no such task exists, it is terminal
    /// already, or the fence refused. Reaching a terminal status re-arms the
    /// expiry to at least `ttl` from now.
    async fn transition(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        effects: Effects,
        fence: Fence<'_>,
    ) -> Result<Option<TaskRow>, StoreError> {
        // A progress message waiting to be written goes first: no change
        // overtakes it (a worker's next progress report replaces it).
        let progress = effects.status == Some(TaskStatus::Working) && fence.lease().is_some();
        if !progress {
            self.write_waiting_progress(scope, task_id).await;
        }
        let change = transition_batch::Change::of_report(scope, task_id, effects, fence)?;
        let status = change.status;
        let transitioned = batch_writer::submit(&self.changes_writer, change).await?;
        if transitioned.is_some() {
            crate::metrics::task_finished(status);
            // A task that ended gave back its key's slot, if it held one:
            // while a backlog waits for its keys, the relay looks again.
            if self.gate.any_held_by_keys() {
                self.outbox.notify_one();
            }
        }
        Ok(transitioned)
    }

    /// Why a transition changed nothing: the task is not visible, it is
    /// terminal (terminal statuses are final, so the answer cannot go
    /// stale), or the report's fence refused it.
    async fn refusal(&self, scope: &Scope, task_id: &TaskId, fence: Fence<'_>) -> StoreError {
        match self.fetch_visible(scope, task_id).await {
            Ok(row) => match row.status() {
                Ok(status) if status.is_terminal() => already_terminal(status),
                Ok(status) => crate::domain::FenceRefusal::explain_for(status, &fence).into(),
                Err(err) => err,
            },
            Err(err) => err,
        }
    }

    async fn delete_expired_batch(&self) -> Result<u64, StoreError> {
        // SKIP LOCKED: replicas sweeping at once take disjoint batches.
        let deleted = sqlx::query(sql!(
            "WITH doomed AS (
                 SELECT tenant_id, task_id FROM tasks
                 WHERE expires_at <= now()
                 ORDER BY expires_at
                 LIMIT $1
                 FOR UPDATE SKIP LOCKED)
             DELETE FROM tasks t USING doomed d
             WHERE t.tenant_id = d.tenant_id AND t.task_id = d.task_id"
        ))
        .bind(i64::from(self.config.cleanup_batch_size))
        .execute(&self.pool)
        .await
        .map_err(store_error)?
        .rows_affected();
        Ok(deleted)
    }
}

/// Commits a read-write transaction (cancel-safe: [`transaction`]).
async fn commit(tx: Transaction<'static, Postgres>) -> Result<(), StoreError> {
    transaction::commit(tx).await.map_err(store_error)
}
