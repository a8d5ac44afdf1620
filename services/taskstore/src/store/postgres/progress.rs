//! Progress that is cheap to send often (issue 41, item 3; docs/execution.md,
//! "Progress"). A worker's progress report on a task this replica wrote
//! less than `PROGRESS_WRITTEN_EVERY` ago is told, not written: a notice
//! (`progress_notices`) checks its lease and reaches the followers on every
//! replica at once, and the message waits here. The last message waiting
//! is written when the period is over (a background pass every second),
//! and before any other change of the task (a result, a cancellation, a
//! release), so a terminal status never overtakes it. Those writes are
//! quiet: followers heard the message already.
//!
//! What a crash of this replica loses: the messages waiting here, at most
//! the last `PROGRESS_WRITTEN_EVERY` of progress text of its tasks. Never a
//! status or a result, which are always written before they are answered.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::PgTaskStore;
use super::progress_notices::Notice;
use super::rows::TaskRow;
use crate::domain::{LeaseToken, PROGRESS_WRITTEN_EVERY, Scope, TaskId, progress_may_wait};
use crate::error::StoreError;
use crate::store::statements::sql;

/// How often waiting messages are looked at.
const WRITE_PASS_EVERY: Duration = Duration::from_secs(1);

/// (tenant, task id).
type Key = (String, String);

/// A progress message told but not yet written.
#[derive(Debug, Clone)]
struct Unwritten {
    lease: String,
    message: Option<String>,
}

#[derive(Debug)]
struct Entry {
    written_at: Instant,
    unwritten: Option<Unwritten>,
}

/// This replica's recent progress writes and the messages waiting.
#[derive(Debug, Default)]
pub(super) struct ProgressWrites {
    entries: Mutex<HashMap<Key, Entry>>,
}

impl ProgressWrites {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn may_wait(&self, key: &Key) -> bool {
        progress_may_wait(self.locked().get(key).map(|e| e.written_at.elapsed()))
    }

    fn waits(&self, key: Key, unwritten: Unwritten) {
        if let Some(entry) = self.locked().get_mut(&key) {
            entry.unwritten = Some(unwritten);
        }
    }

    /// The task's progress was written now (what waited is superseded).
    fn written(&self, key: Key) {
        self.locked().insert(
            key,
            Entry {
                written_at: Instant::now(),
                unwritten: None,
            },
        );
    }

    fn take(&self, key: &Key) -> Option<Unwritten> {
        self.locked().get_mut(key)?.unwritten.take()
    }

    /// The messages whose period is over, taken (counted as written now);
    /// entries with nothing waiting and no recent write are forgotten.
    fn due(&self) -> Vec<(Key, Unwritten)> {
        let mut due = Vec::new();
        self.locked().retain(|key, entry| {
            let over = entry.written_at.elapsed() >= PROGRESS_WRITTEN_EVERY;
            match entry.unwritten.take() {
                Some(unwritten) if over => {
                    due.push((key.clone(), unwritten));
                    entry.written_at = Instant::now();
                    true
                }
                waiting @ Some(_) => {
                    entry.unwritten = waiting;
                    true
                }
                None => !over,
            }
        });
        due
    }

    /// Messages whose write failed wait again, due at the next pass,
    /// unless a newer message superseded them meanwhile: the last message
    /// of a task is written even when no report follows it.
    fn retry(&self, failed: Vec<(Key, Unwritten)>) {
        let mut entries = self.locked();
        for (key, unwritten) in failed {
            let entry = entries.entry(key).or_insert_with(|| Entry {
                written_at: Instant::now(),
                unwritten: None,
            });
            if entry.unwritten.is_none() {
                entry.unwritten = Some(unwritten);
                entry.written_at = Instant::now()
                    .checked_sub(PROGRESS_WRITTEN_EVERY)
                    .unwrap_or(entry.written_at);
            }
        }
    }
}

fn key(scope: &Scope, task_id: &TaskId) -> Key {
    (
        scope.tenant.as_str().to_owned(),
        task_id.as_str().to_owned(),
    )
}

impl PgTaskStore {
    /// A worker's progress report, told without a write when it may wait:
    /// the task as its followers now see it, or `None` when it must be
    /// written (not written lately here, not WORKING, or its fence
    /// refused it: the written path decides).
    pub(super) async fn tell_progress(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        lease: &LeaseToken,
        message: Option<String>,
    ) -> Result<Option<TaskRow>, StoreError> {
        let key = key(scope, task_id);
        if !self.progress.may_wait(&key) {
            return Ok(None);
        }
        let notice = Notice {
            tenant: key.0.clone(),
            task_id: key.1.clone(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
            lease: lease.as_str().to_owned(),
            message: message.clone(),
        };
        let told = super::batch_writer::submit(&self.notices, notice).await?;
        if told.is_some() {
            let lease = lease.as_str().to_owned();
            self.progress.waits(key, Unwritten { lease, message });
        }
        Ok(told)
    }

    /// The task's progress was written now, by a report that took the
    /// written path: what waited is superseded.
    pub(super) fn progress_written(&self, scope: &Scope, task_id: &TaskId) {
        self.progress.written(key(scope, task_id));
    }

    /// Writes the message waiting for the task, if any, before another
    /// change of it. Best effort: the change itself decides what the
    /// caller hears.
    pub(super) async fn write_waiting_progress(&self, scope: &Scope, task_id: &TaskId) {
        let key = key(scope, task_id);
        if let Some(unwritten) = self.progress.take(&key)
            && let Err(err) = write(&self.pool, &[(key, unwritten)]).await
        {
            tracing::debug!(error = %err, "waiting progress not written");
        }
    }
}

/// Writes the messages whose period is over, every second, until `stop`.
pub(super) fn spawn_writer(
    pool: PgPool,
    progress: std::sync::Weak<ProgressWrites>,
    stop: CancellationToken,
) {
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(WRITE_PASS_EVERY);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticker.tick() => {}
            }
            let Some(progress) = progress.upgrade() else {
                return;
            };
            let due = progress.due();
            if !due.is_empty()
                && let Err(err) = write(&pool, &due).await
            {
                tracing::warn!(error = %err, messages = due.len(), "waiting progress not written; retried at the next pass");
                progress.retry(due);
            }
        }
    });
}

/// Writes each message, quietly (its followers heard it), while its
/// attempt still holds the task and it is still WORKING.
async fn write(pool: &PgPool, messages: &[(Key, Unwritten)]) -> Result<(), StoreError> {
    let column = |f: &dyn Fn(&(Key, Unwritten)) -> Option<String>| {
        messages.iter().map(f).collect::<Vec<_>>()
    };
    sqlx::query(sql!(concat!(
        "UPDATE tasks t SET status_message = c.message,",
        " last_updated_at = GREATEST(now(), t.last_updated_at + interval '1 microsecond'),",
        " quiet_changes = t.quiet_changes + 1",
        " FROM unnest($1::text[], $2::text[], $3::text[], $4::text[])",
        "   AS c(tenant, task, lease, message)",
        " WHERE t.tenant_id = c.tenant AND t.task_id = c.task AND t.lease_token = c.lease",
        " AND t.status = 'working' AND t.status_message IS DISTINCT FROM c.message AND ",
        live!("t.")
    )))
    .persistent(false) // planned for its arrays: batch_writer.rs, "Plans"
    .bind(column(&|(key, _)| Some(key.0.clone())))
    .bind(column(&|(key, _)| Some(key.1.clone())))
    .bind(column(&|(_, unwritten)| Some(unwritten.lease.clone())))
    .bind(column(&|(_, unwritten)| unwritten.message.clone()))
    .execute(pool)
    .await
    .map_err(super::error::store_error)?;
    Ok(())
}
