//! The in-process engine's deletions and housekeeping: a task deleted on
//! request, expired tasks deleted, and after a restart, waiting tasks given
//! the jobs that died with the old process.

use super::state::{Key, State};
use super::{MemoryTaskStore, key, visible};
use crate::domain::{Scope, TaskId};
use crate::error::StoreError;

impl MemoryTaskStore {
    /// After a restart: a dispatched task that waits for a worker but has no
    /// job (its job went to an in-process queue that died with the process)
    /// gets one again, at its current generation, due now (a job it had
    /// published is offered as new: the queue it went to may be gone). A
    /// duplicate of a job that still exists elsewhere is harmless: only one
    /// claim succeeds.
    pub async fn requeue_unqueued_jobs(&self) -> Result<u64, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let orphans: Vec<(Key, u64, crate::domain::ToolName)> = state
            .tasks
            .iter()
            .filter(|(_, r)| r.is_live(now) && !r.task.status.is_terminal())
            .filter_map(|(key, r)| {
                let d = r.dispatch.as_ref().filter(|d| d.lease.is_none())?;
                let queued = state
                    .outbox
                    .iter()
                    .any(|j| &j.key == key && j.generation == d.generation && j.publishes == 0);
                (!queued).then(|| (key.clone(), d.generation, d.tool.clone()))
            })
            .collect();
        for (key, generation, tool) in &orphans {
            state.remove_jobs(|job| &job.key == key);
            state.enqueue(key.clone(), *generation, tool, now);
        }
        self.commit(&mut state).await?;
        if !orphans.is_empty() {
            tracing::info!(
                count = orphans.len(),
                "waiting tasks given their jobs again after a restart"
            );
            self.inner.outbox.notify_one();
        }
        Ok(orphans.len() as u64)
    }

    /// Deletes a visible task with its result and its waiting jobs; watchers
    /// are told, and find it gone.
    pub(super) async fn delete_visible(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<(), StoreError> {
        let key = key(scope.tenant.as_str(), task_id);
        {
            let mut state = self.lock().await;
            let now = state.now();
            visible(&mut state, scope, &key, now)?;
            state.tasks.remove(&key);
            state.touch(&key);
            state.remove_jobs(|job| job.key == key);
            self.commit(&mut state).await?;
            self.changed(&state, &key);
        }
        Ok(())
    }

    pub(super) async fn delete_expired(&self) -> Result<u64, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let expired: Vec<Key> = state
            .tasks
            .iter()
            .filter(|(_, record)| !record.is_live(now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &expired {
            state.tasks.remove(key);
            state.touch(key);
        }
        let State { tasks, .. } = &*state;
        let gone: std::collections::HashSet<Key> = state
            .outbox
            .iter()
            .filter(|job| !tasks.contains_key(&job.key))
            .map(|job| job.key.clone())
            .collect();
        state.remove_jobs(|job| gone.contains(&job.key));
        self.commit(&mut state).await?;
        Ok(expired.len() as u64)
    }
}
