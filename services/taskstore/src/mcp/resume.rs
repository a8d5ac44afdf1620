//! Event ids of 2025-11-25 streams, and what a client that reconnects with
//! `Last-Event-ID` (to any replica) resumes. An id is sealed over the
//! caller's tenant and session (`domain::Sealer`), so it names only the
//! caller's own streams and cannot be forged or altered; it holds all a
//! replica needs to pick the stream up, so no replica keeps stream state.
//!
//! - The session's GET stream: the time of the last change it showed; the
//!   resumed stream first shows the session's tasks changed since (a
//!   resync: the latest state of each, which is what status notifications
//!   carry), then follows on.
//! - A waiting request's stream (`tasks/result`, a synchronous
//!   `tools/call`): the task, the request's id, how many of the task's
//!   questions it has handled, and the call's progress token; the resumed
//!   stream sends the questions asked since and then the request's
//!   response.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::gateway::Gateway;
use super::jsonrpc::{Id, RpcError, code};
use crate::domain::{MAX_TOKEN_CHARS, ProgressToken, Purpose, Scope, TaskId};

/// Which request a wait answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WaitKind {
    /// `tasks/result`: the stored result, tied to its task.
    TasksResult,
    /// A synchronous `tools/call`: the result itself.
    ToolCall,
}

impl WaitKind {
    fn as_str(self) -> &'static str {
        match self {
            WaitKind::TasksResult => "result",
            WaitKind::ToolCall => "call",
        }
    }
}

/// Where a waiting request's stream stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WaitPosition {
    pub kind: WaitKind,
    pub task_id: TaskId,
    pub request_id: Id,
    /// The task's questions (in the order asked) already handled: sent, or
    /// answered before they could be.
    pub seen: usize,
    /// A synchronous call's progress token, for its progress notifications.
    pub progress: Option<ProgressToken>,
}

/// Where a stream stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Position {
    /// The session's GET stream, up to the change made at this time.
    Session {
        after: DateTime<Utc>,
    },
    Wait(WaitPosition),
}

impl Position {
    /// The sealed event id; `None` when it would be too long to be taken
    /// back (an enormous request id): such a stream is not resumable.
    pub(super) fn event_id(&self, gateway: &Gateway, scope: &Scope) -> Option<String> {
        let parts: Vec<String> = match self {
            Position::Session { after } => vec!["s".into(), after.timestamp_micros().to_string()],
            Position::Wait(wait) => {
                let mut parts = vec![
                    "w".into(),
                    wait.kind.as_str().into(),
                    wait.task_id.as_str().into(),
                    wait.request_id.as_json().to_string(),
                    wait.seen.to_string(),
                ];
                if let Some(token) = &wait.progress {
                    parts.push(token.as_str().into());
                }
                parts
            }
        };
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        let id = gateway.sealer.seal(Purpose::EventId, scope, &parts);
        (id.len() <= MAX_TOKEN_CHARS).then_some(id)
    }

    /// The position a `Last-Event-ID` names, if this service issued it for
    /// this caller.
    pub(super) fn parse(gateway: &Gateway, scope: &Scope, raw: &str) -> Result<Self, RpcError> {
        let refused = || {
            RpcError::new(
                code::INVALID_REQUEST,
                "Last-Event-ID is not an event id this server issued to this session",
            )
        };
        let parts = gateway
            .sealer
            .open(Purpose::EventId, scope, raw)
            .map_err(|_| refused())?;
        let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
        match parts.as_slice() {
            ["s", micros] => {
                let after = micros
                    .parse()
                    .ok()
                    .and_then(DateTime::<Utc>::from_timestamp_micros)
                    .ok_or_else(refused)?;
                Ok(Position::Session { after })
            }
            ["w", kind, task, request, seen, rest @ ..] => {
                let kind = match *kind {
                    "result" => WaitKind::TasksResult,
                    "call" => WaitKind::ToolCall,
                    _ => return Err(refused()),
                };
                let request: Value = serde_json::from_str(request).map_err(|_| refused())?;
                let progress = match rest {
                    [] => None,
                    [token] => Some(ProgressToken::from_stored(token).ok_or_else(refused)?),
                    _ => return Err(refused()),
                };
                Ok(Position::Wait(WaitPosition {
                    kind,
                    task_id: TaskId::parse(task).map_err(|_| refused())?,
                    request_id: Id::from_value(&request).ok_or_else(refused)?,
                    seen: seen.parse().map_err(|_| refused())?,
                    progress,
                }))
            }
            _ => Err(refused()),
        }
    }
}
