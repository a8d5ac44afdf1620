//! The MCP sessions of a tenant as the dashboard lists them: each session's
//! tasks, how many are unfinished, when it last created one. The counting
//! and the order live here, so that every backend lists alike.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::ids::SessionId;
use super::task::Task;

/// At most this many sessions are listed.
pub const MAX_SESSIONS: u32 = 200;

/// One session's tasks at a glance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    pub session: SessionId,
    /// Its unexpired tasks.
    pub tasks: u64,
    /// … of which working or waiting for input.
    pub unfinished: u64,
    /// When it created its newest task.
    pub last_created_at: DateTime<Utc>,
}

/// Summarises `tasks` by session (tasks without one are left out), the
/// most recently active first (ties by session id), at most `limit`
/// (capped at [`MAX_SESSIONS`]).
pub fn summarise_sessions<'a>(
    tasks: impl IntoIterator<Item = &'a Task>,
    limit: u32,
) -> Vec<SessionSummary> {
    let mut by_session: HashMap<&SessionId, SessionSummary> = HashMap::new();
    for task in tasks {
        let Some(session) = &task.session_id else {
            continue;
        };
        let summary = by_session.entry(session).or_insert_with(|| SessionSummary {
            session: session.clone(),
            tasks: 0,
            unfinished: 0,
            last_created_at: task.created_at,
        });
        summary.tasks += 1;
        summary.unfinished += u64::from(!task.status.is_terminal());
        summary.last_created_at = summary.last_created_at.max(task.created_at);
    }
    let mut sessions: Vec<SessionSummary> = by_session.into_values().collect();
    order_sessions(&mut sessions);
    sessions.truncate(limit.min(MAX_SESSIONS) as usize);
    sessions
}

/// The order sessions are listed in: the most recently active first.
pub fn order_sessions(sessions: &mut [SessionSummary]) {
    sessions.sort_by(|a, b| {
        b.last_created_at
            .cmp(&a.last_created_at)
            .then_with(|| a.session.as_str().cmp(b.session.as_str()))
    });
}
