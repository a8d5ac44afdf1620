//! Tasks and the values the store operations take and return.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::execution::{DispatchRequest, LeaseToken};
use super::ids::{SessionId, TaskId, TenantId};
use super::json::{JsonObject, RequestId};
use super::status::{ResultStatus, TaskStatus};
use super::ttl::Ttl;

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
    /// The requested ttl; `None` asks for the store's default.
    pub ttl: Option<Ttl>,
    pub request_id: RequestId,
    pub request: JsonObject,
    /// Run the task on a worker (`None`: the caller runs it).
    pub dispatch: Option<DispatchRequest>,
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

/// ListTasks: where to continue and how many to return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageRequest {
    pub cursor: Option<String>,
    /// `None` or 0: the store's default page size; capped at its maximum.
    pub page_size: Option<u32>,
}

/// One page of tasks, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    /// `None` on the last page.
    pub next_cursor: Option<String>,
}
