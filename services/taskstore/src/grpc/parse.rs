//! Requests from the wire to domain types: every field is hostile until it
//! is parsed here. A refused field is INVALID_ARGUMENT naming the field.

use crate::domain::questions::MAX_QUESTIONS;
use crate::domain::{
    Answers, ConcurrencyLimit, DispatchRequest, Holder, IdempotencyKey, InputKey, InputRequest,
    JsonObject, KeyExpr, LeaseToken, MAX_HOLDER_BYTES, MAX_POLL_INTERVAL, NewResult, NewTask,
    PageRequest, Priority, RateLimit, RequestId, ResultStatus, RetryPolicy, Scope, SessionId,
    StartTime, StatusUpdate, TaskFilter, TaskId, TaskStatus, TaskSupport, TenantId,
    ToolDescription, ToolName, TraceContext, Ttl, TtlRequest, WorkerHeartbeat,
};
use crate::error::StoreError;

use super::pb;
use crate::domain::InputLimits;

/// A cursor longer than this is refused before it is decoded.
const MAX_CURSOR_CHARS: usize = 1024;
/// The most entries a ListTasks status filter may have.
const MAX_STATUS_FILTERS: usize = 16;

/// AskQuestion's key and request.
pub(super) fn question(
    key: &str,
    request_json: String,
) -> Result<(InputKey, InputRequest), StoreError> {
    let key = InputKey::parse(key).map_err(|err| StoreError::invalid("key", err))?;
    let request = InputRequest::parse(request_json)
        .map_err(|err| StoreError::invalid("request_json", err))?;
    Ok((key, request))
}

/// A heartbeat's tool descriptions (a worker's, so trusted more than a
/// client, but still checked: they reach every MCP client's `tools/list`).
pub(super) fn tool_descriptions(
    raw: Vec<pb::ToolDescription>,
) -> Result<Vec<ToolDescription>, StoreError> {
    if raw.len() > WorkerHeartbeat::MAX_TOOLS {
        return Err(StoreError::invalid(
            "descriptions",
            format!("has more than {} entries", WorkerHeartbeat::MAX_TOOLS),
        ));
    }
    raw.into_iter()
        .map(|d| {
            let name = ToolName::parse(&d.name)
                .map_err(|err| StoreError::invalid("descriptions.name", err))?;
            let support = match pb::TaskSupport::try_from(d.task_support) {
                Ok(pb::TaskSupport::Unspecified | pb::TaskSupport::Optional) => {
                    TaskSupport::Optional
                }
                Ok(pb::TaskSupport::Required) => TaskSupport::Required,
                Ok(pb::TaskSupport::Forbidden) => TaskSupport::Forbidden,
                Err(_) => {
                    return Err(StoreError::invalid(
                        "descriptions.task_support",
                        "is not a known value",
                    ));
                }
            };
            let retry = retry_policy(d.retry)?;
            let concurrency = d
                .concurrency
                .map(|limit| ConcurrencyLimit::parse(limit.max, &limit.key))
                .transpose()
                .map_err(|err| StoreError::invalid("descriptions.concurrency", err))?;
            let rate = d.rate.map(rate_limit).transpose()?;
            let fairness = KeyExpr::parse(&d.fairness_key)
                .map_err(|err| StoreError::invalid("descriptions.fairness_key", err))?;
            ToolDescription::parse(
                name,
                &d.title,
                &d.description,
                &d.input_schema_json,
                support,
            )
            .map(|description| {
                description
                    .with_retry(retry)
                    .with_concurrency(concurrency)
                    .with_rate(rate)
                    .with_fairness(Some(fairness))
            })
            .map_err(|err| StoreError::invalid("descriptions", err))
        })
        .collect()
}

/// A tool's declared rate of starts per key.
fn rate_limit(raw: pb::RateLimit) -> Result<RateLimit, StoreError> {
    let per = non_negative_duration(
        "descriptions.rate.per",
        raw.per
            .ok_or_else(|| StoreError::invalid("descriptions.rate.per", "is required"))?,
    )?;
    RateLimit::parse(raw.starts, per, &raw.key)
        .map_err(|err| StoreError::invalid("descriptions.rate", err))
}

/// A tool's declared retry policy; unset is the service's.
fn retry_policy(raw: Option<pb::RetryPolicy>) -> Result<RetryPolicy, StoreError> {
    let Some(raw) = raw else {
        return Ok(RetryPolicy::default());
    };
    let backoff = |field, d: Option<prost_types::Duration>| {
        d.map(|d| non_negative_duration(field, d)).transpose()
    };
    RetryPolicy::parse(RetryPolicy {
        max_attempts: raw.max_attempts,
        backoff_base: backoff("descriptions.retry.backoff_base", raw.backoff_base)?,
        backoff_max: backoff("descriptions.retry.backoff_max", raw.backoff_max)?,
        retry_errors: raw.retry_errors.unwrap_or(true),
        retry_lost_workers: raw.retry_lost_workers.unwrap_or(true),
    })
    .map_err(|err| StoreError::invalid("descriptions", err))
}

/// Parses requests under one set of limits.
#[derive(Debug, Clone)]
pub(super) struct Edge<'a> {
    limits: &'a InputLimits,
    /// The tenant the request acts in (from its caller, never its body).
    tenant: TenantId,
}

impl<'a> Edge<'a> {
    pub(super) fn new(limits: &'a InputLimits, tenant: TenantId) -> Self {
        Self { limits, tenant }
    }

    /// `trace` is the `traceparent` the task belongs to, if any.
    pub(super) fn create(
        &self,
        req: pb::CreateTaskRequest,
        trace: Option<&str>,
    ) -> Result<(Scope, NewTask), StoreError> {
        let scope = self.scope(req.session_id.as_deref())?;
        let task_id = req.task_id.as_deref().map(task_id).transpose()?;
        let ttl = ttl_request(req.ttl, req.no_expiry)?;
        let poll_interval = req.poll_interval.map(poll_interval).transpose()?;
        let request_id = RequestId::parse(req.request_id_json)
            .map_err(|err| StoreError::invalid("request_id_json", err))?;
        let request = self.json_object("request_json", req.request_json)?;
        request
            .check_tools_call_arguments()
            .map_err(|err| StoreError::invalid("request_json", err))?;
        let dispatch = req.dispatch.map(|d| dispatch(d, &request)).transpose()?;
        let idempotency_key = req
            .idempotency_key
            .as_deref()
            .map(IdempotencyKey::parse)
            .transpose()
            .map_err(|err| StoreError::invalid("idempotency_key", err))?;
        Ok((
            scope,
            NewTask {
                task_id,
                ttl,
                poll_interval,
                request_id,
                request,
                dispatch,
                trace_context: trace.and_then(TraceContext::parse),
                idempotency_key,
            },
        ))
    }

    pub(super) fn lookup(
        &self,
        task: &str,
        session: Option<&str>,
    ) -> Result<(Scope, TaskId), StoreError> {
        Ok((self.scope(session)?, task_id(task)?))
    }

    /// A HoldTask request: the task, its holder, and the lease renewed.
    pub(super) fn hold(
        &self,
        req: &pb::HoldTaskRequest,
    ) -> Result<(Scope, TaskId, Holder, Option<LeaseToken>), StoreError> {
        let (scope, task_id) = self.lookup(&req.task_id, req.session_id.as_deref())?;
        let holder = Holder::parse(&req.holder).ok_or_else(|| {
            StoreError::InvalidArgument(format!(
                "holder must be 1 to {MAX_HOLDER_BYTES} bytes of text without control characters"
            ))
        })?;
        let renewing = match req.lease_token.as_str() {
            "" => None,
            raw => Some(lease_token(raw)?),
        };
        Ok((scope, task_id, holder, renewing))
    }

    /// The scope a request that names no task acts in.
    pub(super) fn scope_of(&self, session: Option<&str>) -> Result<Scope, StoreError> {
        self.scope(session)
    }

    pub(super) fn update(
        &self,
        req: pb::UpdateTaskStatusRequest,
    ) -> Result<(Scope, TaskId, StatusUpdate), StoreError> {
        let (scope, id) = self.lookup(&req.task_id, req.session_id.as_deref())?;
        let status = status("status", req.status)?;
        let message = self.status_message(req.status_message)?;
        let lease = req.lease_token.as_deref().map(lease_token).transpose()?;
        Ok((
            scope,
            id,
            StatusUpdate {
                status,
                message,
                lease,
            },
        ))
    }

    pub(super) fn store_result(
        &self,
        req: pb::StoreTaskResultRequest,
    ) -> Result<(Scope, TaskId, NewResult), StoreError> {
        let (scope, id) = self.lookup(&req.task_id, req.session_id.as_deref())?;
        let status = ResultStatus::try_from(status("status", req.status)?).map_err(|other| {
            StoreError::invalid(
                "status",
                format!("must be completed or failed, not {other}"),
            )
        })?;
        let result = self.json_object("result_json", req.result_json)?;
        let message = self.status_message(req.status_message)?;
        let lease = req.lease_token.as_deref().map(lease_token).transpose()?;
        Ok((
            scope,
            id,
            NewResult {
                status,
                result,
                message,
                lease,
            },
        ))
    }

    pub(super) fn list(
        &self,
        req: pb::ListTasksRequest,
    ) -> Result<(Scope, PageRequest), StoreError> {
        let scope = self.scope(req.session_id.as_deref())?;
        if req
            .cursor
            .as_ref()
            .is_some_and(|c| c.len() > MAX_CURSOR_CHARS)
        {
            return Err(StoreError::invalid("cursor", "is too long"));
        }
        // There are five statuses; a longer list only repeats them.
        if req.statuses.len() > MAX_STATUS_FILTERS {
            return Err(StoreError::invalid(
                "statuses",
                format!("has more than {MAX_STATUS_FILTERS} entries"),
            ));
        }
        let statuses = req
            .statuses
            .iter()
            .map(|raw| status("statuses", *raw))
            .collect::<Result<Vec<_>, _>>()?;
        let tool = req
            .tool
            .as_deref()
            .map(|t| ToolName::parse(t).map_err(|err| StoreError::invalid("tool", err)))
            .transpose()?;
        Ok((
            scope,
            PageRequest {
                cursor: req.cursor,
                page_size: req.page_size,
                filter: TaskFilter::new(statuses, tool),
            },
        ))
    }

    /// AnswerInputRequests: the task and the answers by key (in key order,
    /// each a JSON object under the JSON size limit).
    pub(super) fn answers(
        &self,
        req: pb::AnswerInputRequestsRequest,
    ) -> Result<(Scope, TaskId, Answers), StoreError> {
        let scope = self.scope(req.session_id.as_deref())?;
        let task_id = task_id(&req.task_id)?;
        if req.answers_json.is_empty() || req.answers_json.len() > MAX_QUESTIONS {
            return Err(StoreError::invalid(
                "answers_json",
                format!("must have 1 to {MAX_QUESTIONS} entries"),
            ));
        }
        let mut answers = req
            .answers_json
            .into_iter()
            .map(|(key, answer)| {
                let key = InputKey::parse(&key)
                    .map_err(|err| StoreError::invalid("answers_json key", err))?;
                Ok((key, self.json_object("answers_json", answer)?))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        answers.sort_by(|a, b| a.0.cmp(&b.0));
        Ok((scope, task_id, answers))
    }

    fn scope(&self, session: Option<&str>) -> Result<Scope, StoreError> {
        let limit = self.limits.max_session_id_bytes;
        if session.is_some_and(|raw| raw.len() > limit) {
            return Err(too_long("session_id", limit));
        }
        let session = session
            .map(|raw| SessionId::parse(raw, limit))
            .transpose()
            .map_err(|err| StoreError::invalid("session_id", err))?;
        Ok(Scope {
            tenant: self.tenant.clone(),
            session,
        })
    }

    fn json_object(&self, field: &str, text: String) -> Result<JsonObject, StoreError> {
        if text.len() > self.limits.max_json_bytes {
            return Err(too_long(field, self.limits.max_json_bytes));
        }
        JsonObject::parse(text).map_err(|err| StoreError::invalid(field, err))
    }

    fn status_message(&self, message: Option<String>) -> Result<Option<String>, StoreError> {
        match message {
            Some(m) if m.len() > self.limits.max_status_message_bytes => Err(too_long(
                "status_message",
                self.limits.max_status_message_bytes,
            )),
            other => Ok(other),
        }
    }
}

fn task_id(raw: &str) -> Result<TaskId, StoreError> {
    TaskId::parse(raw).map_err(|err| StoreError::invalid("task_id", err))
}

pub(super) fn lease_token(raw: &str) -> Result<LeaseToken, StoreError> {
    LeaseToken::parse(raw).map_err(|err| StoreError::invalid("lease_token", err))
}

/// The tool to dispatch to: as given, or the `params.name` of a
/// `tools/call` request.
fn dispatch(dispatch: pb::Dispatch, request: &JsonObject) -> Result<DispatchRequest, StoreError> {
    let tool = match dispatch.tool {
        Some(tool) => tool,
        None => request.tools_call_name().ok_or_else(|| {
            StoreError::invalid(
                "dispatch.tool",
                "must be set unless request_json is a tools/call with params.name",
            )
        })?,
    };
    let tool = ToolName::parse(&tool).map_err(|err| StoreError::invalid("dispatch.tool", err))?;
    let start = match (dispatch.start_at, dispatch.start_after) {
        (Some(_), Some(_)) => {
            return Err(StoreError::invalid(
                "dispatch.start_at",
                "and dispatch.start_after exclude each other",
            ));
        }
        (Some(at), None) => Some(StartTime::At(timestamp("dispatch.start_at", at)?)),
        (None, Some(after)) => Some(StartTime::After(non_negative_duration(
            "dispatch.start_after",
            after,
        )?)),
        (None, None) => None,
    };
    Ok(DispatchRequest {
        fairness: None,
        rate: None,
        concurrency: None,
        // Its tool's, read from the tools served (`TaskStoreService::prepare_dispatch`).
        retry: RetryPolicy::default(),
        tool,
        max_attempts: dispatch.max_attempts,
        start,
        priority: dispatch
            .priority
            .map(|raw| Priority::parse(raw, Priority::MAX))
            .transpose()
            .map_err(|err| StoreError::invalid("dispatch.priority", err))?
            .unwrap_or_default(),
    })
}

fn timestamp(
    field: &str,
    at: prost_types::Timestamp,
) -> Result<chrono::DateTime<chrono::Utc>, StoreError> {
    u32::try_from(at.nanos)
        .ok()
        .filter(|nanos| *nanos < 1_000_000_000)
        .and_then(|nanos| chrono::DateTime::from_timestamp(at.seconds, nanos))
        .ok_or_else(|| StoreError::invalid(field, "must be a normalized timestamp in range"))
}

fn status(field: &str, raw: i32) -> Result<TaskStatus, StoreError> {
    let status = pb::TaskStatus::try_from(raw)
        .map_err(|_| StoreError::invalid(field, format!("has an unknown value {raw}")))?;
    super::convert::status_of(status).ok_or_else(|| StoreError::invalid(field, "must be set"))
}

fn ttl(duration: prost_types::Duration) -> Result<Ttl, StoreError> {
    Ttl::from_duration(non_negative_duration("ttl", duration)?)
        .map_err(|err| StoreError::invalid("ttl", err))
}

/// The retention CreateTask asks for: a ttl, no expiry, or the default.
fn ttl_request(
    ttl_field: Option<prost_types::Duration>,
    no_expiry: bool,
) -> Result<TtlRequest, StoreError> {
    match (ttl_field, no_expiry) {
        (Some(_), true) => Err(StoreError::invalid(
            "no_expiry",
            "cannot be set together with ttl",
        )),
        (Some(duration), false) => Ok(TtlRequest::Of(ttl(duration)?)),
        (None, true) => Ok(TtlRequest::Unlimited),
        (None, false) => Ok(TtlRequest::ServerDefault),
    }
}

/// A requested poll interval: at least 1 ms (the store's policy bounds it).
fn poll_interval(duration: prost_types::Duration) -> Result<std::time::Duration, StoreError> {
    let interval = non_negative_duration("poll_interval", duration)?;
    if interval < std::time::Duration::from_millis(1) {
        return Err(StoreError::invalid(
            "poll_interval",
            "must be at least 1 ms",
        ));
    }
    Ok(interval.min(MAX_POLL_INTERVAL))
}

fn non_negative_duration(
    field: &str,
    duration: prost_types::Duration,
) -> Result<std::time::Duration, StoreError> {
    let invalid = |reason: &str| StoreError::invalid(field, reason);
    if duration.seconds < 0 || duration.nanos < 0 || duration.nanos >= 1_000_000_000 {
        return Err(invalid("must be a positive, normalized duration"));
    }
    let seconds = u64::try_from(duration.seconds).map_err(|_| invalid("is out of range"))?;
    let nanos = u32::try_from(duration.nanos).map_err(|_| invalid("is out of range"))?;
    Ok(std::time::Duration::new(seconds, nanos))
}

fn too_long(field: &str, limit: usize) -> StoreError {
    StoreError::invalid(field, format!("is larger than the limit of {limit} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_values() {
        assert_eq!(status("s", 1), Ok(TaskStatus::Working));
        assert!(status("s", 0).is_err());
        assert!(status("s", 6).is_err());
        assert!(status("s", -1).is_err());
        assert!(status("s", i32::MAX).is_err());
    }

    #[test]
    fn ttl_values() {
        let d = |seconds, nanos| prost_types::Duration { seconds, nanos };
        assert_eq!(ttl(d(1, 0)).map(Ttl::as_millis), Ok(1000));
        for bad in [
            d(0, 0),
            d(-1, 0),
            d(0, -1),
            d(0, 1_000_000_000),
            d(i64::MAX, 0),
            d(0, 999_999),
        ] {
            assert!(ttl(bad).is_err(), "{bad:?}");
        }
    }
}
