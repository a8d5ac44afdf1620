//! Tasks and the values the store operations take and return.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::execution::{DispatchRequest, LeaseToken, ToolName};
use super::idempotency::IdempotencyKey;
use super::ids::{SessionId, TaskId, TenantId};
use super::json::{JsonObject, RequestId};
use super::status::{ResultStatus, TaskStatus};
use super::ttl::{Ttl, TtlRequest};

/// Who is asking: every operation acts within one tenant and, when a session
/// is named, sees only that session's tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub tenant: TenantId,
    pub session: Option<SessionId>,
}

impl Scope {
    /// The default tenant, no session: sees every task of the tenant.
    pub fn tenant_wide() -> Self {
        Self {
            tenant: TenantId::default_tenant(),
            session: None,
        }
    }

    /// The default tenant, restricted to one session.
    pub fn session(session: SessionId) -> Self {
        Self {
            tenant: TenantId::default_tenant(),
            session: Some(session),
        }
    }
}

/// A task as the MCP protocol shows it. Serializes with MCP's field names
/// (durations in milliseconds), which the CLI prints with `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    pub task_id: TaskId,
    pub status: TaskStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_updated_at: DateTime<Utc>,
    /// `None`: kept forever.
    #[serde(serialize_with = "ttl_millis")]
    pub ttl: Option<Ttl>,
    #[serde(serialize_with = "duration_millis")]
    pub poll_interval: Duration,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// The tool the task runs (see [`NewTask::tool`]); not part of MCP's
    /// task object, shown in listings and used to filter them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<ToolName>,
}

fn ttl_millis<S: serde::Serializer>(ttl: &Option<Ttl>, s: S) -> Result<S::Ok, S::Error> {
    match ttl {
        Some(ttl) => s.serialize_u64(ttl.as_millis()),
        None => s.serialize_none(),
    }
}

fn duration_millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What CreateTask asks for. The session comes from the [`Scope`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTask {
    /// A caller-chosen id; `None` generates one.
    pub task_id: Option<TaskId>,
    /// The requested retention.
    pub ttl: TtlRequest,
    /// The requested poll interval; `None` asks for the store's default.
    pub poll_interval: Option<Duration>,
    pub request_id: RequestId,
    pub request: JsonObject,
    /// Run the task on a worker (`None`: the caller runs it).
    pub dispatch: Option<DispatchRequest>,
    /// The trace the create belongs to, kept with the task so that its
    /// dispatch (on any replica, after any restart) joins the same trace.
    pub trace_context: Option<TraceContext>,
    /// Makes the create idempotent: a create whose key names a live task
    /// of the tenant returns that task (see [`super::idempotency`]).
    pub idempotency_key: Option<IdempotencyKey>,
}

/// A W3C `traceparent`, checked for shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceContext(String);

impl TraceContext {
    /// `None` for anything that is not a well-formed `traceparent`: trace
    /// context is advisory, so a bad one is dropped rather than refused.
    pub fn parse(raw: &str) -> Option<Self> {
        taskstore_telemetry::propagation::is_traceparent(raw).then(|| Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl NewTask {
    /// The tool the new task runs (see [`tool_of`]).
    pub fn tool(&self) -> Option<ToolName> {
        tool_of(&self.request, self.dispatch.as_ref().map(|d| &d.tool))
    }
}

/// The tool a task runs: the one it is dispatched to, else the `params.name`
/// of a `tools/call` request when that is a valid tool name; `None` for other
/// requests.
pub fn tool_of(request: &JsonObject, dispatched_to: Option<&ToolName>) -> Option<ToolName> {
    match dispatched_to {
        Some(tool) => Some(tool.clone()),
        None => request
            .tools_call_name()
            .and_then(|name| ToolName::parse(&name).ok()),
    }
}

/// UpdateTaskStatus: the new status and its message (`None` clears it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusUpdate {
    pub status: TaskStatus,
    pub message: Option<String>,
    /// A worker's fence: applies only while this lease is current.
    pub lease: Option<LeaseToken>,
}

/// StoreTaskResult: the terminal status, the result and the final message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewResult {
    pub status: ResultStatus,
    pub result: JsonObject,
    pub message: Option<String>,
    /// A worker's fence: stored only while this lease is current.
    pub lease: Option<LeaseToken>,
}

/// A stored result together with its task (whose status is completed or
/// failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskResult {
    pub task: Task,
    pub result: JsonObject,
}

/// ListTasks: where to continue, how many to return, and which tasks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    pub cursor: Option<String>,
    /// `None` or 0: the store's default page size; capped at its maximum.
    pub page_size: Option<u32>,
    /// Which tasks to list (applied before paging; cursors are bound to it).
    pub filter: TaskFilter,
}

/// A ListTasks filter. Empty parts match every task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskFilter {
    /// Only tasks in one of these statuses (sorted, without repeats).
    statuses: Vec<TaskStatus>,
    /// Only tasks of this tool.
    pub tool: Option<ToolName>,
}

impl TaskFilter {
    pub fn new(statuses: impl IntoIterator<Item = TaskStatus>, tool: Option<ToolName>) -> Self {
        let mut statuses: Vec<TaskStatus> = statuses.into_iter().collect();
        // One canonical form, so that a cursor's binding does not depend on
        // the order the statuses were given in.
        statuses.sort_by_key(|status| status.as_str());
        statuses.dedup();
        Self { statuses, tool }
    }

    pub fn statuses(&self) -> &[TaskStatus] {
        &self.statuses
    }

    /// Whether `task` passes the filter.
    pub fn matches(&self, task: &Task) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&task.status))
            && self
                .tool
                .as_ref()
                .is_none_or(|tool| task.tool.as_ref() == Some(tool))
    }
}

/// One page of tasks, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    /// `None` on the last page.
    pub next_cursor: Option<String>,
}
