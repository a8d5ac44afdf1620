//! The in-memory store's data: every task record and the outbox, behind one
//! lock, so each operation is atomic like a single SQL statement.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};

use crate::domain::{
    AttemptHistory, AttemptOutcome, IdempotencyKey, InputRequest, JsonObject, KeyLimit, LeaseToken,
    Priority, ProgressToken, Question, RequestId, RetryPolicy, Task, TaskId, TaskRate, TaskStatus,
    ToolName, WorkerSession,
};

/// (tenant, task id).
pub(super) type Key = (String, String);

/// A claim held by a worker.
#[derive(Debug, Clone)]
pub(super) struct Lease {
    pub token: LeaseToken,
    pub owner: String,
    pub expires_at: DateTime<Utc>,
    /// The worker session it was claimed in (kept in memory only: after a
    /// restart every attempt lives by its own lease until renewed).
    pub session: Option<WorkerSession>,
}

impl Lease {
    /// Whether the attempt is alive (`domain::attempt_alive`).
    pub(super) fn alive(&self, sessions: &Sessions, now: DateTime<Utc>) -> bool {
        let session = self.session.as_ref().and_then(|s| sessions.get(s)).copied();
        crate::domain::attempt_alive(self.expires_at, session, now)
    }
}

/// Each open worker session, until when it lives.
pub(super) type Sessions = HashMap<WorkerSession, DateTime<Utc>>;

/// Dispatch bookkeeping of a task that runs on workers.
#[derive(Debug, Clone)]
pub(super) struct Dispatch {
    pub tool: ToolName,
    pub max_attempts: u32,
    pub attempt: u32,
    pub generation: u64,
    pub lease: Option<Lease>,
    /// Parked: waiting for answers with no attempt and no job.
    pub parked: bool,
    /// Its tool's retry policy when it was created.
    pub retry: RetryPolicy,
    /// Its place in its tool's backlog.
    pub priority: Priority,
    /// Its key's concurrency limit, if its tool declares one.
    pub limit: Option<KeyLimit>,
    /// Its key's rate of starts, if its tool declares one.
    pub rate: Option<TaskRate>,
    /// Its fairness key within its tenant, if its tool declares one.
    pub fairness: Option<String>,
    /// The generation whose job took one of its key's slots (the
    /// dispatch decision sets it; a new generation gives the slot back).
    pub slot: Option<u64>,
}

impl Dispatch {
    /// Whether this task holds one of its key's slots now: its job went
    /// out and has not ended, been parked, dispatched again, or outlived
    /// its lease (a killed worker's slot comes back when its lease
    /// expires). PostgreSQL's `holds_slot!` is the same rule.
    pub(super) fn holds_slot(
        &self,
        status: TaskStatus,
        sessions: &Sessions,
        now: DateTime<Utc>,
    ) -> bool {
        self.limit.is_some()
            && self.slot == Some(self.generation)
            && !status.is_terminal()
            && !self.parked
            && self
                .lease
                .as_ref()
                .is_none_or(|lease| lease.alive(sessions, now))
    }
}

/// One stored task.
#[derive(Debug, Clone)]
pub(super) struct Record {
    pub task: Task,
    /// The creating request's progress token, read from it once.
    pub progress_token: Option<ProgressToken>,
    pub expires_at: Option<DateTime<Utc>>,
    #[allow(dead_code)] // kept like every backend keeps it; no read path yet
    pub request_id: RequestId,
    pub request: JsonObject,
    pub result: Option<JsonObject>,
    pub dispatch: Option<Dispatch>,
    /// The trace the task was created in (W3C traceparent).
    pub trace_context: Option<String>,
    /// The questions its tool asked, in the order asked.
    pub questions: Vec<Question>,
    /// Its attempts (capped), for the dashboard.
    pub attempts: AttemptHistory,
    /// The key its create carried, while the key still names it.
    pub idempotency_key: Option<IdempotencyKey>,
}

impl Record {
    /// The requests still waiting for an answer.
    pub(super) fn open_requests(&self) -> Vec<&InputRequest> {
        crate::domain::questions::open_requests(&self.questions)
    }

    /// The lease its current attempt holds, if any.
    pub(super) fn lease(&self) -> Option<&Lease> {
        self.dispatch.as_ref().and_then(|d| d.lease.as_ref())
    }

    pub(super) fn is_live(&self, now: DateTime<Utc>) -> bool {
        self.expires_at.is_none_or(|at| at > now)
    }

    /// Moves to `status` at `now`; reaching a terminal status re-arms the
    /// expiry to at least `ttl` from now.
    pub(super) fn transition(
        &mut self,
        status: TaskStatus,
        message: Option<String>,
        now: DateTime<Utc>,
    ) {
        if status.is_terminal() {
            // The attempt running now, if any, ends with the task.
            self.attempts.ended(
                AttemptOutcome::Finished {
                    status,
                    message: message.clone(),
                },
                now,
            );
        }
        self.task.status = status;
        self.task.status_message = message;
        self.task.last_updated_at = now;
        if status.is_terminal()
            && let (Some(expires_at), Some(ttl)) = (self.expires_at, self.task.ttl)
        {
            self.expires_at = Some(expires_at.max(now + delta(ttl.as_duration())));
        }
    }
}

/// A job waiting in the outbox.
#[derive(Debug, Clone)]
pub(super) struct Job {
    pub id: u64,
    pub key: Key,
    pub generation: u64,
    pub tool: String,
    pub available_at: DateTime<Utc>,
    /// Taken by a relay that is publishing it (so a second relay skips it).
    pub in_flight: bool,
    /// How often it was published; a published job stays until its task
    /// is claimed, and goes out again if it is not claimed in time
    /// (`ExecutionPolicy::republish_interval`).
    pub publishes: u32,
}

/// Everything the store holds.
#[derive(Debug, Default)]
pub(super) struct State {
    pub tasks: HashMap<Key, Record>,
    pub outbox: Vec<Job>,
    pub next_job_id: u64,
    /// The last timestamp handed out: the store's clock never repeats or goes
    /// back, so `created_at` orders tasks and `last_updated_at` always moves.
    pub last_timestamp: Option<DateTime<Utc>>,
    /// What the current operation changed (added, modified or removed), for
    /// the persistence layer to write through.
    pub dirty_tasks: HashSet<Key>,
    pub dirty_jobs: HashSet<u64>,
    /// Per (tool, rate key), when the windows of its recent jobs are over,
    /// oldest first (kept in memory only: after a restart a key's window
    /// starts empty).
    pub starts: HashMap<(String, String), std::collections::VecDeque<DateTime<Utc>>>,
    /// Per (tool, pause key), until when its jobs wait (a back-off; kept in
    /// memory only).
    pub pauses: HashMap<(String, String), DateTime<Utc>>,
    /// The open worker sessions (kept in memory only).
    pub sessions: Sessions,
    /// The tasks that may hold a lease: each grant adds its task
    /// (`apply`), and the reaper drops those that no longer hold one. So
    /// the reaper reads the running tasks, not every task (issue 41,
    /// item 5: tasks at rest cost no periodic work).
    pub leased: HashSet<Key>,
}

impl State {
    /// The current time, at microsecond precision (like PostgreSQL), strictly
    /// after every earlier timestamp of this store.
    pub(super) fn now(&mut self) -> DateTime<Utc> {
        let wall = Utc::now();
        let wall = DateTime::from_timestamp_micros(wall.timestamp_micros()).unwrap_or(wall);
        let now = match self.last_timestamp {
            Some(last) if wall <= last => last + TimeDelta::microseconds(1),
            _ => wall,
        };
        self.last_timestamp = Some(now);
        now
    }

    /// Marks a task as changed by the current operation.
    pub(super) fn touch(&mut self, key: &Key) {
        self.dirty_tasks.insert(key.clone());
    }

    /// Removes the jobs `doomed` selects, marking them changed.
    pub(super) fn remove_jobs(&mut self, mut doomed: impl FnMut(&Job) -> bool) {
        let (removed, kept): (Vec<Job>, Vec<Job>) =
            self.outbox.drain(..).partition(|job| doomed(job));
        self.outbox = kept;
        self.dirty_jobs.extend(removed.iter().map(|job| job.id));
    }

    pub(super) fn enqueue(
        &mut self,
        key: Key,
        generation: u64,
        tool: &ToolName,
        available_at: DateTime<Utc>,
    ) {
        self.next_job_id += 1;
        self.dirty_jobs.insert(self.next_job_id);
        self.outbox.push(Job {
            id: self.next_job_id,
            key,
            generation,
            tool: tool.to_string(),
            available_at,
            in_flight: false,
            publishes: 0,
        });
    }

    /// Whether a job still stands for its task's current dispatch.
    pub(super) fn job_is_current(&self, job: &Job, now: DateTime<Utc>) -> bool {
        self.tasks.get(&job.key).is_some_and(|record| {
            record.is_live(now)
                && !record.task.status.is_terminal()
                && record
                    .dispatch
                    .as_ref()
                    .is_some_and(|d| d.generation == job.generation && d.lease.is_none())
        })
    }
}

pub(super) fn delta(duration: Duration) -> TimeDelta {
    TimeDelta::from_std(duration).unwrap_or(TimeDelta::MAX)
}

pub(super) fn key(tenant: &str, task_id: &TaskId) -> Key {
    (tenant.to_owned(), task_id.as_str().to_owned())
}
