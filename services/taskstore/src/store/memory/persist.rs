//! Write-through persistence for the in-process engine: each operation's
//! changed records and jobs are written (in one transaction) before the
//! caller sees the outcome, and everything is loaded back at startup. The
//! file is the truth; memory is its cache.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::state::{Dispatch, Job, Key, Lease, Record, State};
use crate::domain::{
    Answer, AttemptHistory, IdempotencyKey, InputKey, InputRequest, JsonObject, KeyLimit,
    LeaseToken, Priority, ProgressToken, Question, RequestId, RetryPolicy, SessionId, Task, TaskId,
    TaskRate, TaskStatus, ToolName, Ttl, tool_of,
};
use crate::error::StoreError;

/// Where the engine's state lives between runs.
#[async_trait]
pub trait Persistence: Send + Sync + std::fmt::Debug + 'static {
    /// Applies one operation's changes atomically: `Some` upserts, `None`
    /// deletes.
    async fn write(
        &self,
        tasks: Vec<((String, String), Option<StoredRecord>)>,
        jobs: Vec<(u64, Option<StoredJob>)>,
    ) -> Result<(), StoreError>;

    /// Everything stored.
    async fn load(&self) -> Result<(Vec<StoredRecord>, Vec<StoredJob>), StoreError>;

    /// The cursor key, created once and kept, so cursors survive restarts.
    async fn cursor_key(&self) -> Result<[u8; 32], StoreError>;
}

/// A task record as it is stored: plain values, checked again on load.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredRecord {
    pub tenant: String,
    pub task_id: String,
    pub status: String,
    pub status_message: Option<String>,
    pub created_at_us: i64,
    pub last_updated_at_us: i64,
    pub ttl_ms: Option<u64>,
    pub poll_interval_ms: u64,
    pub session_id: Option<String>,
    pub expires_at_us: Option<i64>,
    pub request_id: String,
    pub request: String,
    pub result: Option<String>,
    pub dispatch: Option<StoredDispatch>,
    /// Absent in files written before traces were kept.
    #[serde(default)]
    pub trace_context: Option<String>,
    /// Absent in files written before tasks could ask.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub questions: Vec<StoredQuestion>,
    /// Its attempt history, in the JSON PostgreSQL keeps too; absent in
    /// files written before it was kept, and while it is empty.
    #[serde(default, skip_serializing_if = "AttemptHistory::is_empty")]
    pub attempts: AttemptHistory,
    /// The key that made its create idempotent, while it names the task;
    /// absent in files written before creates could carry one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// A question as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredQuestion {
    pub key: String,
    pub request: String,
    pub asked_at_us: i64,
    pub answer: Option<String>,
    pub answered_at_us: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredDispatch {
    pub tool: String,
    pub max_attempts: u32,
    pub attempt: u32,
    pub generation: u64,
    pub lease: Option<StoredLease>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub parked: bool,
    /// Its tool's retry policy (`RetryPolicy::to_stored`); absent: the
    /// service's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry: Option<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: u8,
    /// Its key's concurrency limit: the key and its most at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<(String, u32)>,
    /// Its key's rate: the key, its starts and its window in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<(String, u32, u64)>,
    /// The generation holding one of its key's slots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u64>,
    /// Its fairness key within its tenant.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<String>,
}

fn is_zero(priority: &u8) -> bool {
    *priority == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredLease {
    pub token: String,
    pub owner: String,
    pub expires_at_us: i64,
}

/// An outbox job as it is stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoredJob {
    pub id: u64,
    pub tenant: String,
    pub task_id: String,
    pub generation: u64,
    pub tool: String,
    pub available_at_us: i64,
    /// Stores written before jobs were kept once published have none.
    #[serde(default)]
    pub publishes: u32,
}

fn micros(at: DateTime<Utc>) -> i64 {
    at.timestamp_micros()
}

fn time(us: i64) -> Result<DateTime<Utc>, StoreError> {
    DateTime::from_timestamp_micros(us).ok_or_else(|| corrupt("timestamp out of range"))
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    tracing::error!(error = %what, "corrupt stored record");
    StoreError::Internal("corrupt stored record".into())
}

impl From<&Record> for StoredRecord {
    fn from(record: &Record) -> Self {
        let task = &record.task;
        let (tenant, task_id) = (String::new(), task.task_id.to_string());
        StoredRecord {
            tenant,
            task_id,
            status: task.status.as_str().to_owned(),
            status_message: task.status_message.clone(),
            created_at_us: micros(task.created_at),
            last_updated_at_us: micros(task.last_updated_at),
            ttl_ms: task.ttl.map(Ttl::as_millis),
            poll_interval_ms: u64::try_from(task.poll_interval.as_millis()).unwrap_or(u64::MAX),
            session_id: task.session_id.as_ref().map(|s| s.to_string()),
            expires_at_us: record.expires_at.map(micros),
            request_id: record.request_id.as_str().to_owned(),
            request: record.request.as_str().to_owned(),
            result: record.result.as_ref().map(|r| r.as_str().to_owned()),
            dispatch: record.dispatch.as_ref().map(|d| StoredDispatch {
                tool: d.tool.to_string(),
                max_attempts: d.max_attempts,
                attempt: d.attempt,
                generation: d.generation,
                retry: d.retry.to_stored(),
                priority: d.priority.get(),
                limit: d.limit.as_ref().map(|l| (l.key.clone(), l.max)),
                rate: d.rate.as_ref().map(|r| {
                    let per = u64::try_from(r.per.as_millis()).unwrap_or(u64::MAX);
                    (r.key.clone(), r.starts, per)
                }),
                slot: d.slot,
                fairness: d.fairness.clone(),
                lease: d.lease.as_ref().map(|l| StoredLease {
                    token: l.token.as_str().to_owned(),
                    owner: l.owner.clone(),
                    expires_at_us: micros(l.expires_at),
                }),
                parked: d.parked,
            }),
            trace_context: record.trace_context.clone(),
            questions: record
                .questions
                .iter()
                .map(|q| StoredQuestion {
                    key: q.key.to_string(),
                    request: q.request.as_json().as_str().to_owned(),
                    asked_at_us: micros(q.asked_at),
                    answer: q.answer.as_ref().map(|a| a.result.as_str().to_owned()),
                    answered_at_us: q.answer.as_ref().map(|a| micros(a.answered_at)),
                })
                .collect(),
            attempts: record.attempts.clone(),
            idempotency_key: record
                .idempotency_key
                .as_ref()
                .map(|key| key.as_str().to_owned()),
        }
    }
}

/// The stored form of `record`, which lives under `key`.
pub(super) fn stored(key: &Key, record: &Record) -> StoredRecord {
    StoredRecord {
        tenant: key.0.clone(),
        ..StoredRecord::from(record)
    }
}

impl TryFrom<StoredRecord> for (Key, Record) {
    type Error = StoreError;

    fn try_from(stored: StoredRecord) -> Result<Self, StoreError> {
        let task = Task {
            task_id: TaskId::parse(&stored.task_id).map_err(corrupt)?,
            status: stored.status.parse::<TaskStatus>().map_err(corrupt)?,
            status_message: stored.status_message,
            created_at: time(stored.created_at_us)?,
            last_updated_at: time(stored.last_updated_at_us)?,
            ttl: stored
                .ttl_ms
                .map(Ttl::from_millis)
                .transpose()
                .map_err(corrupt)?,
            poll_interval: Duration::from_millis(stored.poll_interval_ms),
            session_id: stored
                .session_id
                .map(|s| SessionId::parse(&s, usize::MAX))
                .transpose()
                .map_err(corrupt)?,
            // Derived from the request and dispatch below (not stored).
            tool: None,
        };
        let dispatch = stored
            .dispatch
            .map(|d| -> Result<Dispatch, StoreError> {
                Ok(Dispatch {
                    tool: ToolName::parse(&d.tool).map_err(corrupt)?,
                    max_attempts: d.max_attempts,
                    attempt: d.attempt,
                    generation: d.generation,
                    retry: RetryPolicy::of_stored(d.retry.as_deref()),
                    priority: Priority::of_stored(i16::from(d.priority)),
                    limit: d.limit.map(|(key, max)| KeyLimit::new(key, max)),
                    rate: d.rate.map(|(key, starts, per)| TaskRate {
                        key,
                        starts,
                        per: Duration::from_millis(per),
                    }),
                    slot: d.slot,
                    fairness: d.fairness,
                    lease: d
                        .lease
                        .map(|l| -> Result<Lease, StoreError> {
                            Ok(Lease {
                                token: LeaseToken::parse(&l.token).map_err(corrupt)?,
                                owner: l.owner,
                                expires_at: time(l.expires_at_us)?,
                                session: None,
                            })
                        })
                        .transpose()?,
                    parked: d.parked,
                })
            })
            .transpose()?;
        let key = (stored.tenant, stored.task_id);
        let request = JsonObject::parse(stored.request).map_err(corrupt)?;
        let task = Task {
            tool: tool_of(&request, dispatch.as_ref().map(|d| &d.tool)),
            ..task
        };
        let record = Record {
            task,
            progress_token: ProgressToken::of_request(&request),
            expires_at: stored.expires_at_us.map(time).transpose()?,
            request_id: RequestId::parse(stored.request_id).map_err(corrupt)?,
            request,
            result: stored
                .result
                .map(JsonObject::parse)
                .transpose()
                .map_err(corrupt)?,
            dispatch,
            trace_context: stored.trace_context,
            questions: stored
                .questions
                .into_iter()
                .map(question)
                .collect::<Result<_, _>>()?,
            attempts: stored.attempts,
            idempotency_key: stored
                .idempotency_key
                .as_deref()
                .map(IdempotencyKey::parse)
                .transpose()
                .map_err(corrupt)?,
        };
        Ok((key, record))
    }
}

fn question(stored: StoredQuestion) -> Result<Question, StoreError> {
    let answer = match (stored.answer, stored.answered_at_us) {
        (Some(result), Some(at)) => Some(Answer {
            result: JsonObject::parse(result).map_err(corrupt)?,
            answered_at: time(at)?,
        }),
        (None, None) => None,
        _ => return Err(corrupt("an answer without its time, or the other way")),
    };
    Ok(Question {
        key: InputKey::parse(&stored.key).map_err(corrupt)?,
        request: InputRequest::parse(stored.request).map_err(corrupt)?,
        asked_at: time(stored.asked_at_us)?,
        answer,
    })
}

impl From<&Job> for StoredJob {
    fn from(job: &Job) -> Self {
        StoredJob {
            id: job.id,
            tenant: job.key.0.clone(),
            task_id: job.key.1.clone(),
            generation: job.generation,
            tool: job.tool.clone(),
            available_at_us: micros(job.available_at),
            publishes: job.publishes,
        }
    }
}

impl TryFrom<StoredJob> for Job {
    type Error = StoreError;

    fn try_from(stored: StoredJob) -> Result<Self, StoreError> {
        Ok(Job {
            id: stored.id,
            key: (stored.tenant, stored.task_id),
            generation: stored.generation,
            tool: stored.tool,
            available_at: time(stored.available_at_us)?,
            in_flight: false,
            publishes: stored.publishes,
        })
    }
}

/// A loaded state, ready to replace the engine's.
#[derive(Debug)]
pub(super) struct Loaded {
    tasks: HashMap<Key, Record>,
    outbox: Vec<Job>,
}

impl Loaded {
    pub(super) fn from_stored(
        records: Vec<StoredRecord>,
        jobs: Vec<StoredJob>,
    ) -> Result<Self, StoreError> {
        let tasks = records
            .into_iter()
            .map(<(Key, Record)>::try_from)
            .collect::<Result<HashMap<_, _>, _>>()?;
        let outbox = jobs
            .into_iter()
            .map(Job::try_from)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { tasks, outbox })
    }

    /// Replaces `state`'s data; the clock and job ids continue after the
    /// newest stored ones, so they never repeat.
    pub(super) fn install(self, state: &mut State) {
        let newest = self
            .tasks
            .values()
            .map(|r| r.task.last_updated_at.max(r.task.created_at))
            .max();
        state.last_timestamp = state.last_timestamp.max(newest);
        state.next_job_id = state
            .next_job_id
            .max(self.outbox.iter().map(|j| j.id).max().unwrap_or(0));
        state.leased = self
            .tasks
            .iter()
            .filter(|(_, r)| r.lease().is_some())
            .map(|(key, _)| key.clone())
            .collect();
        state.tasks = self.tasks;
        state.outbox = self.outbox;
        state.dirty_tasks.clear();
        state.dirty_jobs.clear();
    }
}
