//! A job's direct path: the replica that commits a dispatched task knows it
//! has a job, so its relay takes the job from memory at once (and settles
//! it once published: `settle`), without
//! reading the outbox back (no SELECT … FOR UPDATE, no transaction held
//! across the publish).
//!
//! The job's outbox row is still written in the create's statement, but due
//! only [`HANDOFF_GRACE`] later. It is the guarantee: if this replica crashes
//! or cannot reach the queue before then, any replica's relay publishes it
//! when it falls due. Once the queue confirmed the job, the row is marked
//! published in the background, many at a time, and falls due again much
//! later, when the relay deletes it (its task was claimed) or publishes it
//! again (the broker may have lost it); a second delivery is fenced at
//! claim, as always.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use sqlx::PgPool;
use taskstore_proto::jobs::JobMessage;
use tokio::sync::{Notify, mpsc};

use super::PgTaskStore;
use super::error::store_error;
use super::rows::millis;
use crate::domain::MAX_REPUBLISH_INTERVAL;
use crate::store::execution::DueJob;
use crate::store::statements::sql;

/// How long a committed job is left to the replica that created it before
/// every replica's relay may publish it.
pub const HANDOFF_GRACE: Duration = Duration::from_secs(5);

/// A job older than this in memory is left to the outbox (its row falls due
/// soon), so that the two paths do not both publish it; the half of the
/// grace between them covers the time from the database's commit to the
/// job's arrival here.
const FRESH_FOR: Duration = Duration::from_millis(2500);

/// Most jobs waiting in memory (a relay that cannot publish, for a long
/// outage): beyond it, new jobs are left to the outbox alone.
const MAX_WAITING: usize = 10_000;

/// Most confirmed jobs whose rows one DELETE removes.
const FORGET_BATCH: usize = 1000;
/// How long confirmed jobs gather before their rows are deleted: one
/// statement for many jobs, well within the grace.
const FORGET_EVERY: Duration = Duration::from_millis(200);

/// A job this replica committed and has not yet handed to the queue.
#[derive(Debug, Clone)]
pub(super) struct FreshJob {
    pub outbox_id: i64,
    pub message: JobMessage,
    pub committed_at: Instant,
}

impl FreshJob {
    /// As the relay publishes it.
    pub(super) fn into_due(self) -> DueJob {
        DueJob {
            outbox_id: self.outbox_id,
            message: self.message,
        }
    }

    /// The job of outbox row `outbox_id`, for the task's dispatch
    /// `generation` as the row stores it.
    pub(super) fn of_row(
        outbox_id: i64,
        tenant_id: String,
        task_id: String,
        generation: i64,
        tool: String,
        trace_context: Option<String>,
        committed_at: Instant,
    ) -> Self {
        FreshJob {
            outbox_id,
            message: JobMessage {
                tenant_id,
                task_id,
                // Generations start at 1 and only grow; a row out of range
                // gets 0, which no claim matches.
                generation: u64::try_from(generation).unwrap_or(0),
                tool,
                trace_context,
            },
            committed_at,
        }
    }
}

/// How often the relay reads the outbox for due jobs while it is busy with
/// fresh ones (when it has none, it reads it on every pass).
const POLL_WHILE_BUSY: Duration = Duration::from_secs(1);

/// The jobs waiting for this replica's relay, and the signal that wakes it.
#[derive(Debug, Clone)]
pub(super) struct FreshJobs {
    waiting: Arc<Mutex<Vec<FreshJob>>>,
    wake: Arc<Notify>,
    polled_at: Arc<Mutex<Instant>>,
}

impl FreshJobs {
    pub(super) fn new(wake: Arc<Notify>) -> Self {
        Self {
            waiting: Arc::default(),
            wake,
            polled_at: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// Whether this pass of the relay reads the outbox too: always when it
    /// had no fresh jobs (it was woken by the poll timer, or by a retry or
    /// redispatch written to the outbox), else at most every
    /// [`POLL_WHILE_BUSY`], so that due jobs are never starved by a stream
    /// of fresh ones.
    fn poll_due(&self, had_fresh: bool) -> bool {
        let mut polled_at = self
            .polled_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if had_fresh && polled_at.elapsed() < POLL_WHILE_BUSY {
            return false;
        }
        *polled_at = Instant::now();
        true
    }

    /// Hands committed jobs to the relay and wakes it (also when jobs were
    /// only left to its decision: `to_decide`).
    pub(super) fn push(&self, jobs: impl IntoIterator<Item = FreshJob>, to_decide: bool) {
        let added = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            let before = waiting.len();
            let room = MAX_WAITING.saturating_sub(before);
            waiting.extend(jobs.into_iter().take(room));
            before < waiting.len()
        };
        if added || to_decide {
            self.wake.notify_one();
        }
    }

    /// Forgets the job of a task this replica ended (cancelled or deleted)
    /// before its job went out: nothing to publish. (Ended through another
    /// replica, the job is published and its claim refused.)
    pub(super) fn discard(&self, tenant_id: &str, task_id: &str) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        waiting.retain(|job| job.message.tenant_id != tenant_id || job.message.task_id != task_id);
    }

    /// Up to `limit` of the oldest waiting jobs still fresh; older ones are
    /// dropped (their rows are due, or nearly, in the outbox).
    fn take(&self, limit: usize) -> Vec<FreshJob> {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let stale = waiting
            .iter()
            .take_while(|job| job.committed_at.elapsed() >= FRESH_FOR)
            .count();
        waiting.drain(..stale);
        let n = limit.min(waiting.len());
        waiting.drain(..n).collect()
    }
}

/// Starts the task that marks the rows of confirmed jobs published; it ends
/// when every sender is dropped. A published row stays until its job is
/// known claimed: it falls due again after
/// `ExecutionPolicy::republish_interval` (restated here in SQL: the policy's
/// `republish_after`, doubling with each publish, at most
/// `MAX_REPUBLISH_INTERVAL`), and the relay then deletes it or, if its task
/// still waits for that job, publishes it again (`governed::promote_due`).
pub(super) fn spawn_forgetter(
    pool: PgPool,
    republish_after: Duration,
) -> mpsc::UnboundedSender<i64> {
    let (sender, mut receiver) = mpsc::unbounded_channel::<i64>();
    tokio::spawn(async move {
        let mut ids = Vec::with_capacity(FORGET_BATCH);
        while let Some(first) = receiver.recv().await {
            ids.push(first);
            let gathered = tokio::time::sleep(FORGET_EVERY);
            tokio::pin!(gathered);
            while ids.len() < FORGET_BATCH {
                tokio::select! {
                    () = &mut gathered => break,
                    next = receiver.recv() => match next {
                        Some(id) => ids.push(id),
                        None => break,
                    },
                }
            }
            let published = sqlx::query(sql!(
                "UPDATE dispatch_outbox SET ready = false,
                     publishes = LEAST(publishes, 1000) + 1,
                     available_at = now()
                         + LEAST($2::bigint * power(2, LEAST(publishes, 30)), $3::bigint)
                         * interval '1 millisecond'
                 WHERE id = ANY($1)"
            ))
            .persistent(false) // planned for its array: batch_writer.rs, "Plans"
            .bind(&ids)
            .bind(millis(republish_after))
            .bind(millis(MAX_REPUBLISH_INTERVAL))
            .execute(&pool)
            .await;
            if let Err(err) = published {
                // The rows fall due after the grace; the relay then finds
                // the jobs claimed (stale) or publishes them again.
                tracing::warn!(error = %store_error(err), jobs = ids.len(), "marking the outbox rows of published jobs failed; they are checked again when due");
            }
            ids.clear();
        }
    });
    sender
}

impl PgTaskStore {
    /// Whether this relay pass reads the outbox (see [`FreshJobs::poll_due`]).
    pub(super) fn poll_due(&self, had_fresh: bool) -> bool {
        self.fresh.poll_due(had_fresh)
    }

    /// Up to `limit` of the jobs this replica committed, oldest first.
    pub(super) fn take_fresh(&self, limit: u32) -> Vec<DueJob> {
        self.fresh
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .into_iter()
            .map(FreshJob::into_due)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(task: &str, age: Duration) -> FreshJob {
        FreshJob {
            outbox_id: 1,
            message: JobMessage {
                tenant_id: "t".into(),
                task_id: task.into(),
                generation: 1,
                tool: "echo".into(),
                trace_context: None,
            },
            committed_at: Instant::now().checked_sub(age).expect("a past instant"),
        }
    }

    fn ids(jobs: &[FreshJob]) -> Vec<&str> {
        jobs.iter()
            .map(|job| job.message.task_id.as_str())
            .collect()
    }

    #[tokio::test]
    async fn jobs_go_out_oldest_first_and_wake_the_relay() {
        let wake = Arc::new(Notify::new());
        let fresh = FreshJobs::new(wake.clone());
        fresh.push([job("a", Duration::ZERO), job("b", Duration::ZERO)], false);
        fresh.push([job("c", Duration::ZERO)], false);
        tokio::time::timeout(Duration::from_millis(100), wake.notified())
            .await
            .expect("woken");
        assert_eq!(ids(&fresh.take(2)), ["a", "b"]);
        assert_eq!(ids(&fresh.take(2)), ["c"]);
        assert!(fresh.take(2).is_empty());
    }

    #[test]
    fn a_job_too_old_for_memory_is_left_to_the_outbox() {
        let fresh = FreshJobs::new(Arc::new(Notify::new()));
        fresh.push([job("old", FRESH_FOR), job("new", Duration::ZERO)], false);
        assert_eq!(ids(&fresh.take(10)), ["new"]);
    }

    #[test]
    fn an_ended_tasks_job_is_discarded() {
        let fresh = FreshJobs::new(Arc::new(Notify::new()));
        fresh.push([job("a", Duration::ZERO), job("b", Duration::ZERO)], false);
        fresh.discard("t", "a");
        fresh.discard("other tenant", "b");
        assert_eq!(ids(&fresh.take(10)), ["b"]);
    }

    #[test]
    fn memory_holds_at_most_its_bound() {
        let fresh = FreshJobs::new(Arc::new(Notify::new()));
        fresh.push(
            (0..MAX_WAITING + 5).map(|n| job(&n.to_string(), Duration::ZERO)),
            false,
        );
        assert_eq!(fresh.take(usize::MAX).len(), MAX_WAITING);
    }

    #[test]
    fn the_outbox_is_read_on_every_idle_pass_and_now_and_then_when_busy() {
        let fresh = FreshJobs::new(Arc::new(Notify::new()));
        assert!(fresh.poll_due(false));
        assert!(!fresh.poll_due(true), "busy, and just read");
        assert!(fresh.poll_due(false));
        *fresh.polled_at.lock().expect("lock") = Instant::now()
            .checked_sub(POLL_WHILE_BUSY)
            .expect("a past instant");
        assert!(fresh.poll_due(true), "busy, but not read for a while");
    }
}
