//! Domain types to protobuf messages (server side) and back (client side).

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::{
    Answer, HoldOutcome, InputKey, InputRequest, JsonObject, LeaseToken, ProgressToken, Question,
    RetryPolicy, ServedTool, SessionId, StopReason, Task, TaskId, TaskStatus, TaskSupport,
    ToolDescription, ToolName, Ttl,
};
use crate::error::StoreError;
use crate::store::{ChangedTask, Followed};

use super::pb;

impl From<TaskStatus> for pb::TaskStatus {
    fn from(status: TaskStatus) -> Self {
        match status {
            TaskStatus::Working => pb::TaskStatus::Working,
            TaskStatus::InputRequired => pb::TaskStatus::InputRequired,
            TaskStatus::Completed => pb::TaskStatus::Completed,
            TaskStatus::Failed => pb::TaskStatus::Failed,
            TaskStatus::Cancelled => pb::TaskStatus::Cancelled,
        }
    }
}

impl From<Task> for pb::Task {
    fn from(task: Task) -> Self {
        pb::Task {
            task_id: task.task_id.to_string(),
            status: pb::TaskStatus::from(task.status).into(),
            status_message: task.status_message,
            created_at: Some(timestamp(task.created_at)),
            last_updated_at: Some(timestamp(task.last_updated_at)),
            ttl: task.ttl.map(|ttl| duration(ttl.as_duration())),
            poll_interval: Some(duration(task.poll_interval)),
            session_id: task.session_id.map(|s| s.to_string()),
            tool: task.tool.map(|t| t.to_string()),
        }
    }
}

impl From<ServedTool> for pb::ServedTool {
    fn from(tool: ServedTool) -> Self {
        pb::ServedTool {
            name: tool.name.to_string(),
            workers: tool.workers,
            slots: tool.slots,
            busy: tool.busy,
            last_seen_at: Some(timestamp(tool.last_seen_at)),
            description: Some(tool.description.into()),
            consuming: tool.consuming,
            descriptions: tool.descriptions,
        }
    }
}

impl From<ToolDescription> for pb::ToolDescription {
    fn from(d: ToolDescription) -> Self {
        pb::ToolDescription {
            rate: d.rate.map(|rate| pb::RateLimit {
                starts: rate.starts,
                per: Some(duration(rate.per)),
                key: rate.key.source(),
            }),
            name: d.name.to_string(),
            title: d.title.unwrap_or_default(),
            description: d.description.unwrap_or_default(),
            input_schema_json: d.input_schema.into_string(),
            task_support: match d.task_support {
                TaskSupport::Optional => pb::TaskSupport::Optional,
                TaskSupport::Required => pb::TaskSupport::Required,
                TaskSupport::Forbidden => pb::TaskSupport::Forbidden,
            }
            .into(),
            retry: (!d.retry.is_default()).then(|| retry_policy(&d.retry)),
            concurrency: d.concurrency.map(|limit| pb::ConcurrencyLimit {
                max: limit.max,
                key: limit.key.source(),
            }),
            fairness_key: d.fairness.map(|key| key.source()).unwrap_or_default(),
        }
    }
}

fn retry_policy(retry: &RetryPolicy) -> pb::RetryPolicy {
    pb::RetryPolicy {
        max_attempts: retry.max_attempts,
        backoff_base: retry.backoff_base.map(duration),
        backoff_max: retry.backoff_max.map(duration),
        retry_errors: (!retry.retry_errors).then_some(false),
        retry_lost_workers: (!retry.retry_lost_workers).then_some(false),
    }
}

pub(super) fn timestamp(at: DateTime<Utc>) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: at.timestamp(),
        nanos: i32::try_from(at.timestamp_subsec_nanos()).unwrap_or(0),
    }
}

pub(super) fn duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// A task as a server sent it. The server is trusted less than our own
/// database: anything off is an INTERNAL error, never a panic.
impl From<Followed> for pb::TaskEvent {
    fn from(item: Followed) -> Self {
        match item {
            Followed::Changed(changed) => pb::TaskEvent {
                event: Some(pb::task_event::Event::Changed(pb::Task::from(
                    changed.task.clone(),
                ))),
                progress_token_json: changed
                    .progress_token
                    .as_ref()
                    .map(|token| token.as_str().to_owned()),
            },
            Followed::Resync => pb::TaskEvent {
                event: Some(pb::task_event::Event::Resync(pb::Resync {})),
                progress_token_json: None,
            },
        }
    }
}

/// Client side: a WatchTasks event as the follow item it stands for.
pub(super) fn followed_from_pb(event: pb::TaskEvent) -> Result<Followed, StoreError> {
    match event.event {
        Some(pb::task_event::Event::Changed(task)) => {
            Ok(Followed::Changed(std::sync::Arc::new(ChangedTask {
                task: task_from_pb(task)?,
                progress_token: event
                    .progress_token_json
                    .as_deref()
                    .and_then(ProgressToken::from_stored),
            })))
        }
        Some(pb::task_event::Event::Resync(_)) => Ok(Followed::Resync),
        None => Err(malformed("a task event without an event")),
    }
}

pub(super) fn stop_reason_to_pb(reason: StopReason) -> pb::StopReason {
    match reason {
        StopReason::Cancelled => pb::StopReason::Cancelled,
        StopReason::Finished => pb::StopReason::Finished,
        StopReason::Gone => pb::StopReason::Gone,
        StopReason::LeaseLost => pb::StopReason::LeaseLost,
    }
}

pub(super) fn stop_reason_from_pb(raw: i32) -> Result<StopReason, StoreError> {
    match pb::StopReason::try_from(raw) {
        Ok(pb::StopReason::Cancelled) => Ok(StopReason::Cancelled),
        Ok(pb::StopReason::Finished) => Ok(StopReason::Finished),
        Ok(pb::StopReason::Gone) => Ok(StopReason::Gone),
        Ok(pb::StopReason::LeaseLost) => Ok(StopReason::LeaseLost),
        Ok(pb::StopReason::Unspecified) | Err(_) => Err(malformed("a stop without a reason")),
    }
}

pub(super) fn hold_to_pb(outcome: HoldOutcome) -> pb::HoldTaskResponse {
    match outcome {
        HoldOutcome::Held { lease, duration: d } => pb::HoldTaskResponse {
            lease_token: lease.as_str().to_owned(),
            lease_duration: Some(duration(d)),
            keep_running: true,
            reason: String::new(),
            stop_reason: pb::StopReason::Unspecified.into(),
        },
        HoldOutcome::Stop(reason) => pb::HoldTaskResponse {
            lease_token: String::new(),
            lease_duration: None,
            keep_running: false,
            reason: reason.to_string(),
            stop_reason: stop_reason_to_pb(reason).into(),
        },
    }
}

pub(super) fn hold_from_pb(response: pb::HoldTaskResponse) -> Result<HoldOutcome, StoreError> {
    if !response.keep_running {
        return Ok(HoldOutcome::Stop(stop_reason_from_pb(
            response.stop_reason,
        )?));
    }
    Ok(HoldOutcome::Held {
        lease: LeaseToken::parse(&response.lease_token).map_err(malformed)?,
        duration: response
            .lease_duration
            .map(duration_from_pb)
            .transpose()?
            .ok_or_else(|| malformed("a hold without a lease duration"))?,
    })
}

pub(super) fn task_from_pb(task: pb::Task) -> Result<Task, StoreError> {
    let status = status_from_pb(task.status)?;
    Ok(Task {
        task_id: TaskId::parse(&task.task_id).map_err(malformed)?,
        status,
        status_message: task.status_message,
        created_at: timestamp_from_pb(task.created_at)?,
        last_updated_at: timestamp_from_pb(task.last_updated_at)?,
        ttl: task
            .ttl
            .map(|d| duration_from_pb(d).and_then(|d| Ttl::from_duration(d).map_err(malformed)))
            .transpose()?,
        poll_interval: duration_from_pb(task.poll_interval.unwrap_or_default())?,
        session_id: task
            .session_id
            .map(|s| SessionId::parse(&s, usize::MAX).map_err(malformed))
            .transpose()?,
        tool: task
            .tool
            .map(|t| ToolName::parse(&t).map_err(malformed))
            .transpose()?,
    })
}

/// The domain's status for a wire status; `None` for UNSPECIFIED, which
/// stands for no status at all. (The one mapping, both ways with
/// `From<TaskStatus>` above.)
pub(super) fn status_of(status: pb::TaskStatus) -> Option<TaskStatus> {
    match status {
        pb::TaskStatus::Working => Some(TaskStatus::Working),
        pb::TaskStatus::InputRequired => Some(TaskStatus::InputRequired),
        pb::TaskStatus::Completed => Some(TaskStatus::Completed),
        pb::TaskStatus::Failed => Some(TaskStatus::Failed),
        pb::TaskStatus::Cancelled => Some(TaskStatus::Cancelled),
        pb::TaskStatus::Unspecified => None,
    }
}

/// A status as a server sent it.
pub(super) fn status_from_pb(raw: i32) -> Result<TaskStatus, StoreError> {
    let status = pb::TaskStatus::try_from(raw).map_err(malformed)?;
    status_of(status).ok_or_else(|| malformed("unspecified status"))
}

fn timestamp_from_pb(at: Option<prost_types::Timestamp>) -> Result<DateTime<Utc>, StoreError> {
    let at = at.ok_or_else(|| malformed("missing timestamp"))?;
    let nanos = u32::try_from(at.nanos).map_err(malformed)?;
    DateTime::from_timestamp(at.seconds, nanos).ok_or_else(|| malformed("timestamp out of range"))
}

pub(super) fn duration_from_pb(d: prost_types::Duration) -> Result<Duration, StoreError> {
    let seconds = u64::try_from(d.seconds).map_err(malformed)?;
    let nanos = u32::try_from(d.nanos).map_err(malformed)?;
    if nanos >= 1_000_000_000 {
        return Err(malformed("duration not normalized"));
    }
    Ok(Duration::new(seconds, nanos))
}

impl From<Question> for pb::InputRequest {
    fn from(question: Question) -> Self {
        let (answer_json, answered_at) = match question.answer {
            Some(answer) => (
                Some(answer.result.into_string()),
                Some(timestamp(answer.answered_at)),
            ),
            None => (None, None),
        };
        pb::InputRequest {
            key: question.key.to_string(),
            request_json: question.request.as_json().as_str().to_owned(),
            asked_at: Some(timestamp(question.asked_at)),
            answer_json,
            answered_at,
        }
    }
}

/// A question from the server.
pub(super) fn question_from_pb(raw: pb::InputRequest) -> Result<Question, StoreError> {
    let answer = match (raw.answer_json, raw.answered_at) {
        (Some(text), at @ Some(_)) => Some(Answer {
            result: JsonObject::parse(text).map_err(malformed)?,
            answered_at: timestamp_from_pb(at)?,
        }),
        (None, _) => None,
        (Some(_), None) => return Err(malformed("an answer without its time")),
    };
    Ok(Question {
        key: InputKey::parse(&raw.key).map_err(malformed)?,
        request: InputRequest::parse(raw.request_json).map_err(malformed)?,
        asked_at: timestamp_from_pb(raw.asked_at)?,
        answer,
    })
}

fn malformed(err: impl std::fmt::Display) -> StoreError {
    tracing::error!(error = %err, "malformed response from the server");
    StoreError::Internal(format!("malformed response from the server: {err}"))
}
