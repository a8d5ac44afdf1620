//! The service's side of the execution protocol in memory: the lease
//! reaper and the outbox relay, with the decisions of `domain::execution`.

use std::sync::Arc;

use async_trait::async_trait;
use taskstore_proto::jobs::JobMessage;
use tokio::sync::Notify;

use super::MemoryTaskStore;
use super::apply::apply;
use super::state::{Key, Record, State, delta};
use crate::domain::{AttemptEnd, Effects, KeyCounts, NextStep, WaitingJob};
use crate::error::StoreError;
use crate::store::execution::{DispatchStore, DueJob, JobPublisher, log_held_for_worker};

#[async_trait]
impl DispatchStore for MemoryTaskStore {
    async fn reap_expired_leases(&self) -> Result<u64, StoreError> {
        let reaped: Vec<Key> = {
            let mut state = self.lock().await;
            let now = state.now();
            state.sessions.retain(|_, expires| *expires >= now);
            let State {
                tasks,
                sessions,
                leased,
                ..
            } = &mut *state;
            // Only the tasks that may hold a lease; those that no longer do
            // (ended, released, deleted) leave the set here.
            leased.retain(|key| tasks.get(key).and_then(Record::lease).is_some());
            let expired: Vec<Key> = leased
                .iter()
                .filter_map(|key| tasks.get(key).map(|r| (key, r)))
                .filter(|(_, r)| r.is_live(now) && !r.task.status.is_terminal())
                .filter(|(_, r)| r.lease().is_some_and(|lease| !lease.alive(sessions, now)))
                .map(|(key, _)| key.clone())
                .collect();
            for key in &expired {
                match self.end_attempt(&mut state, key, &AttemptEnd::LeaseExpired, now) {
                    NextStep::Fail { .. } => {
                        tracing::warn!(task_id = %key.1, "lease expired on the last attempt; task failed");
                    }
                    NextStep::Redispatch { .. } => {
                        tracing::warn!(task_id = %key.1, "lease expired; dispatching again");
                    }
                    // A lost lease is never a park.
                    NextStep::Park { .. } | NextStep::Unchanged => {}
                }
            }
            self.commit(&mut state).await?;
            for key in &expired {
                self.changed(&state, key);
            }
            expired
        };
        if !reaped.is_empty() {
            self.inner.outbox.notify_one();
        }
        Ok(reaped.len() as u64)
    }

    async fn take_due_jobs(
        &self,
        limit: u32,
        queue: &dyn JobPublisher,
    ) -> Result<Vec<DueJob>, StoreError> {
        // The tools with due jobs, and how many of each their queues take
        // now (asked without the lock).
        let tools: Vec<String> = {
            let mut state = self.lock().await;
            let now = state.now();
            let stale: Vec<u64> = state
                .outbox
                .iter()
                .filter(|j| !state.job_is_current(j, now))
                .map(|j| j.id)
                .collect();
            state.remove_jobs(|job| stale.contains(&job.id));
            self.commit(&mut state).await?;
            let mut tools: Vec<String> = state
                .outbox
                .iter()
                .filter(|j| !j.in_flight && j.available_at <= now)
                .map(|j| j.tool.clone())
                .collect();
            tools.sort();
            tools.dedup();
            tools
        };
        let mut rooms = Vec::with_capacity(tools.len());
        for tool in tools {
            let depth = queue.depth(&tool).await;
            let room = self
                .inner
                .gate
                .room(&tool, depth)
                .map_or(usize::MAX, |room| room as usize);
            rooms.push((tool, room));
        }
        let mut state = self.lock().await;
        let now = state.now();
        let State {
            outbox,
            tasks,
            dirty_tasks,
            starts,
            pauses,
            sessions,
            ..
        } = &mut *state;
        pauses.retain(|_, until| *until > now);
        let config = self.config();
        let weight = |tenant: &str| config.dispatch_weight(tenant);
        let mut due = Vec::new();
        for (tool, room) in rooms {
            let left = (limit as usize).saturating_sub(due.len());
            let waiting: Vec<usize> = outbox
                .iter()
                .enumerate()
                .filter(|(_, j)| j.tool == tool && !j.in_flight && j.available_at <= now)
                .map(|(i, _)| i)
                .collect();
            let candidates: Vec<WaitingJob> = waiting
                .iter()
                .map(|&i| {
                    let job = &outbox[i];
                    let dispatch = tasks.get(&job.key).and_then(|r| r.dispatch.as_ref());
                    // Published before and unclaimed: it holds its slot and
                    // its start was counted.
                    let first = job.publishes == 0;
                    WaitingJob {
                        id: i64::try_from(job.id).unwrap_or(i64::MAX),
                        tenant: job.key.0.clone(),
                        priority: dispatch.map(|d| d.priority).unwrap_or_default(),
                        fairness: dispatch
                            .and_then(|d| d.fairness.clone())
                            .unwrap_or_default(),
                        limit: dispatch.and_then(|d| d.limit.clone()).filter(|_| first),
                        rate: dispatch.and_then(|d| d.rate.clone()).filter(|_| first),
                    }
                })
                .collect();
            let mut counts = KeyCounts {
                paused: pauses
                    .iter()
                    .filter(|((paused_tool, _), until)| *paused_tool == tool && **until > now)
                    .map(|((_, key), _)| key.clone())
                    .collect(),
                running: if candidates.iter().any(|job| job.limit.is_some()) {
                    running_per_key(tasks, outbox, sessions, &tool, now)
                } else {
                    std::collections::HashMap::new()
                },
                started: started_per_key(starts, &tool, &candidates, now),
            };
            let chosen = self.inner.gate.choose(
                &tool,
                &candidates,
                room.min(left),
                &weight,
                &mut counts,
                &[],
            );
            self.inner
                .gate
                .decided(&tool, candidates.len() > chosen.len());
            due.extend(chosen.into_iter().map(|c| waiting[c]));
        }
        // In the order decided: the queue keeps it.
        let taken = due
            .iter()
            .map(|&i| {
                let job = &outbox[i];
                let outbox_id = i64::try_from(job.id)
                    .map_err(|_| StoreError::Internal("outbox id out of range".into()))?;
                Ok(DueJob {
                    outbox_id,
                    message: JobMessage {
                        tenant_id: job.key.0.clone(),
                        task_id: job.key.1.clone(),
                        generation: job.generation,
                        tool: job.tool.clone(),
                        trace_context: tasks.get(&job.key).and_then(|r| r.trace_context.clone()),
                    },
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // Every job read before any is marked taken: a refusal leaves none
        // in flight. A limited job takes its key's slot as it goes.
        for i in due {
            outbox[i].in_flight = true;
            let job = &outbox[i];
            if job.publishes > 0 {
                tracing::info!(task_id = %job.key.1, publishes = job.publishes, "published job not claimed in time; publishing it again in case the queue lost it");
                continue;
            }
            let Some(dispatch) = tasks.get_mut(&job.key).and_then(|r| r.dispatch.as_mut()) else {
                continue;
            };
            if dispatch.limit.is_some() {
                dispatch.slot = Some(job.generation);
                dirty_tasks.insert(job.key.clone());
            }
            if let Some(rate) = &dispatch.rate {
                // Kept until its window is over.
                starts
                    .entry((job.tool.clone(), rate.key.clone()))
                    .or_default()
                    .push_back(now + super::state::delta(rate.per));
            }
        }
        self.commit(&mut state).await?;
        Ok(taken)
    }

    async fn forget_jobs(&self, queued: &[i64]) -> Result<(), StoreError> {
        // Kept until its task is claimed (each pass drops the jobs no task
        // waits for), and published again if no worker claims it in time.
        let mut state = self.lock().await;
        let now = state.now();
        let policy = self.config().execution;
        let State {
            outbox, dirty_jobs, ..
        } = &mut *state;
        for job in outbox
            .iter_mut()
            .filter(|job| queued.iter().any(|&id| outbox_id(job.id) == Some(id)))
        {
            job.in_flight = false;
            job.publishes = job.publishes.saturating_add(1);
            job.available_at = now + delta(policy.republish_interval(job.publishes));
            dirty_jobs.insert(job.id);
        }
        self.commit(&mut state).await
    }

    async fn hold_for_worker(&self, job: &DueJob) -> Result<(), StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let retry = self.config().execution.unroutable_retry;
        if let Some(held) = state
            .outbox
            .iter_mut()
            .find(|j| outbox_id(j.id) == Some(job.outbox_id))
        {
            held.in_flight = false;
            held.available_at = now + delta(retry);
            let held = held.id;
            state.dirty_jobs.insert(held);
        }
        let message = &job.message;
        let key = (message.tenant_id.clone(), message.task_id.clone());
        let current = state.tasks.get(&key).map(|r| r.task.status_message.clone());
        let noted = match current {
            Some(current) => {
                let effects = Effects::of_waiting_for_worker(current.as_deref(), &message.tool);
                apply(&mut state, &key, &effects, now)
            }
            None => false,
        };
        self.commit(&mut state).await?;
        if noted {
            log_held_for_worker(&message.task_id, &message.tool);
            self.changed(&state, &key);
        }
        Ok(())
    }

    async fn leave_to_outbox(&self, unsent: &[i64]) {
        let mut state = self.lock().await;
        for job in state.outbox.iter_mut() {
            if unsent.iter().any(|&id| outbox_id(job.id) == Some(id)) {
                job.in_flight = false;
            }
        }
    }

    fn outbox_signal(&self) -> Arc<Notify> {
        self.inner.outbox.clone()
    }
}

/// A job's id as the relay knows it (`DueJob::outbox_id`).
fn outbox_id(id: u64) -> Option<i64> {
    i64::try_from(id).ok()
}

/// The tasks of `tool` holding a slot of their key now, per key (a dev
/// store's scan: only a decision with limited jobs waiting makes it). A
/// task whose job waits again (its publish failed, or the store restarted
/// before it was claimed) holds none.
fn running_per_key(
    tasks: &std::collections::HashMap<Key, super::state::Record>,
    outbox: &[super::state::Job],
    sessions: &super::state::Sessions,
    tool: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> std::collections::HashMap<String, u32> {
    let waiting: std::collections::HashSet<(&Key, u64)> = outbox
        .iter()
        .filter(|job| job.tool == tool && !job.in_flight && job.publishes == 0)
        .map(|job| (&job.key, job.generation))
        .collect();
    let mut running = std::collections::HashMap::new();
    for (key, record) in tasks {
        if let Some(dispatch) = &record.dispatch
            && dispatch.tool.as_str() == tool
            && dispatch.holds_slot(record.task.status, sessions, now)
            && !waiting.contains(&(key, dispatch.generation))
            && let Some(limit) = &dispatch.limit
        {
            *running.entry(limit.key.clone()).or_default() += 1;
        }
    }
    running
}

/// Per rate key of `candidates`, how many of its jobs were sent within its
/// window, forgetting the older ones.
fn started_per_key(
    starts: &mut std::collections::HashMap<
        (String, String),
        std::collections::VecDeque<chrono::DateTime<chrono::Utc>>,
    >,
    tool: &str,
    candidates: &[WaitingJob],
    now: chrono::DateTime<chrono::Utc>,
) -> std::collections::HashMap<String, u32> {
    let mut started = std::collections::HashMap::new();
    for rate in candidates.iter().filter_map(|job| job.rate.as_ref()) {
        if started.contains_key(&rate.key) {
            continue;
        }
        let recent = starts
            .entry((tool.to_owned(), rate.key.clone()))
            .or_default();
        while recent.front().is_some_and(|over| *over <= now) {
            recent.pop_front();
        }
        started.insert(
            rate.key.clone(),
            u32::try_from(recent.len()).unwrap_or(u32::MAX),
        );
    }
    started
}
