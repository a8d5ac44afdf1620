//! The worker registry, outbox backlog and health check of the in-process
//! engine. The registry lives in memory only, even with SQLite: workers
//! report again within seconds of a restart.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use chrono::Utc;

use super::MemoryTaskStore;
use super::state::delta;
use crate::domain::{OutboxBacklog, Reach, TaskStatus, WorkerHeartbeat, WorkerId, WorkerInfo};
use crate::error::StoreError;
use crate::store::operations::OperationsStore;

/// The workers that reported, by the reach that announced them and id.
#[derive(Debug, Default)]
pub(super) struct Registry {
    workers: Mutex<HashMap<(Reach, WorkerId), WorkerInfo>>,
}

impl Registry {
    fn locked(&self) -> std::sync::MutexGuard<'_, HashMap<(Reach, WorkerId), WorkerInfo>> {
        // Plain map updates cannot be left half-done by a panic.
        self.workers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[async_trait]
impl OperationsStore for MemoryTaskStore {
    async fn record_heartbeat(&self, heartbeat: &WorkerHeartbeat) -> Result<(), StoreError> {
        let now = Utc::now();
        let mut workers = self.inner.workers.locked();
        let key = (heartbeat.reach.clone(), heartbeat.worker_id.clone());
        let first_seen_at = workers.get(&key).map_or(now, |known| known.first_seen_at);
        workers.insert(
            key,
            WorkerInfo {
                heartbeat: heartbeat.clone(),
                first_seen_at,
                last_seen_at: now,
            },
        );
        Ok(())
    }

    async fn forget_worker(&self, worker: &WorkerId, reach: &Reach) -> Result<(), StoreError> {
        self.inner
            .workers
            .locked()
            .remove(&(reach.clone(), worker.clone()));
        Ok(())
    }

    async fn workers(&self, within: Duration) -> Result<Vec<WorkerInfo>, StoreError> {
        let since = Utc::now() - delta(within);
        let mut seen: Vec<WorkerInfo> = self
            .inner
            .workers
            .locked()
            .values()
            .filter(|w| w.last_seen_at > since)
            .cloned()
            .collect();
        seen.sort_by(|a, b| {
            (&a.heartbeat.worker_id, a.heartbeat.reach.to_string())
                .cmp(&(&b.heartbeat.worker_id, b.heartbeat.reach.to_string()))
        });
        Ok(seen)
    }

    async fn forget_silent_workers(&self, unseen_for: Duration) -> Result<u64, StoreError> {
        let since = Utc::now() - delta(unseen_for);
        let mut workers = self.inner.workers.locked();
        let before = workers.len();
        workers.retain(|_, w| w.last_seen_at > since);
        Ok((before - workers.len()) as u64)
    }

    async fn tasks_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let mut counts: Vec<(TaskStatus, u64)> =
            TaskStatus::ALL.into_iter().map(|s| (s, 0)).collect();
        for record in state.tasks.values().filter(|r| r.is_live(now)) {
            if let Some(entry) = counts.iter_mut().find(|(s, _)| *s == record.task.status) {
                entry.1 += 1;
            }
        }
        Ok(counts)
    }

    async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        // A published job is in its queue, not in the backlog.
        let backlog = || state.outbox.iter().filter(|job| job.publishes == 0);
        let due: Vec<_> = backlog()
            .filter(|job| job.available_at <= now)
            .map(|job| job.available_at)
            .collect();
        let oldest_due_age = due
            .iter()
            .min()
            .and_then(|oldest| (now - *oldest).to_std().ok())
            .unwrap_or_default();
        Ok(OutboxBacklog {
            jobs: backlog().count() as u64,
            due: due.len() as u64,
            oldest_due_age,
        })
    }

    async fn dispatch_view(&self) -> Result<Vec<crate::domain::ToolDispatch>, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        Ok(crate::domain::dispatch_view::merge(
            super::dispatch_view::rows(&mut state, now),
        ))
    }

    async fn lift_pause(&self, tool: &str, key: &str) -> Result<bool, StoreError> {
        let lifted = {
            let mut state = self.lock().await;
            let now = state.now();
            super::dispatch_view::lift(&mut state, tool, key, now)
        };
        self.inner.outbox.notify_one();
        Ok(lifted)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        // The state is in this process; taking its lock shows it is not
        // wedged. (With SQLite, every write already checks the file.)
        drop(self.lock().await);
        Ok(())
    }

    fn shared_key(&self, label: &str) -> [u8; 32] {
        self.inner.cursors.derive(label)
    }
}
