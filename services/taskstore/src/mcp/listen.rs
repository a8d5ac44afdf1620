//! `GET /mcp` (2025-11-25): the session's stream of server messages. It
//! carries `notifications/tasks/status` (the full task) for every change of
//! the session's tasks, made through any replica, and
//! `notifications/progress` for each progress message of a task created by
//! a request with a `progressToken`, until the task ends. Events come from
//! the change feed (no read per event); every event has an id, and a client
//! that reconnects with `Last-Event-ID` first gets the session's tasks
//! changed since (or, if the id names a waiting request's stream, that
//! stream resumed: `resume.rs`).
//!
//! Questions are not sent here: they go on the `tasks/result` stream the
//! client opens when it sees `input_required`, and sending them twice
//! would ask the user twice.

use std::collections::VecDeque;
use std::sync::Arc;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};
use http::{HeaderMap, StatusCode, header};
use serde_json::Map;
use tokio_stream::StreamExt;

use super::admit::{authenticate, foreign_origin};
use super::call::Call;
use super::gateway::Gateway;
use super::jsonrpc::{RpcError, code};
use super::methods;
use super::request::{VERSION_HEADER, call_of, header_str, refuse};
use super::resume::{Position, WaitKind};
use super::sse::{Event, EventSource, events_of, sse};
use super::streams::{RESUME_AFTER, stream_response};
use super::waiting::{progress_notification, status_notification};
use super::{tasks, tools};
use crate::domain::{PageRequest, Revision, Scope, Task};
use crate::edge::WaitingSlot;
use crate::store::{ChangedTask, Followed, TaskFollow};

/// A resync looks back this far before the last change shown: changes
/// commit in an order slightly different from their timestamps.
const RESYNC_SLACK: TimeDelta = TimeDelta::seconds(2);

/// A resync shows at most this many pages of the session's tasks.
const RESYNC_PAGES: usize = 10;

pub(super) async fn open(State(gateway): State<Arc<Gateway>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = foreign_origin(&gateway, &headers) {
        return refusal;
    }
    // 2026-07-28 has no stream of its own (`subscriptions/listen` is a POST).
    if header_str(&headers, VERSION_HEADER) == Some(Revision::V2026_07_28.as_str()) {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "POST")]).into_response();
    }
    if !accepts_event_stream(&headers) {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            None,
            RpcError::new(
                code::INVALID_REQUEST,
                "GET /mcp needs Accept: text/event-stream",
            ),
        );
    }
    let caller = match authenticate(&gateway, &headers).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal,
    };
    let call = match call_of(
        &gateway,
        &headers,
        caller,
        methods::SESSION_STREAM,
        &Map::new(),
        None,
    ) {
        Ok(call) => call,
        Err((status, error)) => return refuse(status, None, error),
    };
    if let Err(error) = methods::check_allowed(&call, methods::SESSION_STREAM) {
        return refuse(StatusCode::FORBIDDEN, None, error);
    }
    let slot = match gateway.admissions.hold_waiting(&call.scope.tenant) {
        Ok(slot) => slot,
        Err(refused) => return refuse(StatusCode::TOO_MANY_REQUESTS, None, refused.into()),
    };
    let position = match header_str(&headers, "last-event-id") {
        None => None,
        Some(raw) => match Position::parse(&gateway, &call.scope, raw) {
            Ok(position) => Some(position),
            Err(error) => return refuse(StatusCode::BAD_REQUEST, None, error),
        },
    };
    match position {
        None => session_stream(gateway, call.scope, None, slot).await,
        Some(Position::Session { after }) => {
            session_stream(gateway, call.scope, Some(after), slot).await
        }
        Some(Position::Wait(wait)) => {
            tracing::info!(task_id = %wait.task_id, "mcp stream resumed");
            let scope = call.scope.clone();
            let waiting = match wait.kind {
                WaitKind::TasksResult => {
                    tasks::result_wait(gateway.clone(), scope.clone(), wait, slot)
                }
                WaitKind::ToolCall => {
                    let call = Call {
                        id: Some(wait.request_id.clone()),
                        ..call
                    };
                    tools::call_wait(gateway.clone(), call, wait, Some(slot))
                }
            };
            stream_response(gateway, scope, waiting, None, |_| {})
        }
    }
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    header_str(headers, header::ACCEPT.as_str()).is_some_and(|accept| {
        accept.split(',').any(|kind| {
            let essence = kind.split(';').next().unwrap_or("").trim();
            essence.eq_ignore_ascii_case("text/event-stream") || essence == "*/*"
        })
    })
}

async fn session_stream(
    gateway: Arc<Gateway>,
    scope: Scope,
    after: Option<DateTime<Utc>>,
    slot: WaitingSlot,
) -> Response {
    // Followed before the resync reads, so that nothing falls between.
    let follow = match gateway.store.follow_tasks(&scope).await {
        Ok(follow) => follow,
        Err(err) => return refuse(StatusCode::SERVICE_UNAVAILABLE, None, err.into()),
    };
    let mut stream = SessionStream {
        last: after.unwrap_or_else(Utc::now),
        gateway,
        scope,
        follow,
        pending: VecDeque::new(),
        resync_since: after,
        ended: false,
        _slot: slot,
    };
    // The first event holds only the position: the client can resume from
    // here even before anything changed.
    let priming = stream.event_at(None);
    stream.pending.push_back(priming);
    sse(events_of(stream))
}

struct SessionStream {
    gateway: Arc<Gateway>,
    scope: Scope,
    follow: TaskFollow,
    pending: VecDeque<Event>,
    /// The time of the latest change shown.
    last: DateTime<Utc>,
    /// Show the session's tasks changed since then, before what follows.
    resync_since: Option<DateTime<Utc>>,
    ended: bool,
    _slot: WaitingSlot,
}

impl SessionStream {
    /// An event at the current position (`None`: the position alone).
    fn event_at(&self, message: Option<&serde_json::Value>) -> Event {
        let mut event = Event::default().data(message.map_or_else(String::new, |m| m.to_string()));
        if let Some(id) =
            (Position::Session { after: self.last }).event_id(&self.gateway, &self.scope)
        {
            event = event.id(id);
        }
        event
    }

    /// The events of one change: its status, and its progress.
    fn show(&mut self, changed: &ChangedTask) {
        let task = &changed.task;
        self.last = self.last.max(task.last_updated_at);
        // A `tasks/result` stream of this session carries it (here).
        if !self
            .gateway
            .result_streams
            .carries(&self.scope, &task.task_id)
        {
            let status = self.event_at(Some(&status_notification(task)));
            self.pending.push_back(status);
        }
        if let Some(token) = &changed.progress_token
            && let Some(progress) = progress_notification(token, task)
        {
            let progress = self.event_at(Some(&progress));
            self.pending.push_back(progress);
        }
    }

    /// The session's tasks changed since `since` (less the slack), oldest
    /// change first.
    async fn resync(&mut self, since: DateTime<Utc>) -> Result<(), crate::StoreError> {
        let since = since - RESYNC_SLACK;
        let mut changed: Vec<Task> = Vec::new();
        let mut cursor = None;
        for _ in 0..RESYNC_PAGES {
            let page = self
                .gateway
                .store
                .list_tasks(
                    &self.scope,
                    PageRequest {
                        cursor: cursor.take(),
                        ..PageRequest::default()
                    },
                )
                .await?;
            changed.extend(
                page.tasks
                    .into_iter()
                    .filter(|t| t.last_updated_at >= since),
            );
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        changed.sort_by_key(|task| task.last_updated_at);
        for task in changed {
            self.show(&ChangedTask {
                task,
                progress_token: None,
            });
        }
        Ok(())
    }
}

impl EventSource for SessionStream {
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            if let Some(since) = self.resync_since.take() {
                if let Err(err) = self.resync(since).await {
                    // Ended rather than silent: the client reconnects with
                    // the last id it got and the resync runs again.
                    tracing::warn!(error = %err, "mcp stream resync failed; ending the stream");
                    return None;
                }
                continue;
            }
            let item = tokio::select! {
                () = self.gateway.shutdown.cancelled() => {
                    self.ended = true;
                    return Some(self.event_at(None).retry(RESUME_AFTER));
                }
                item = self.follow.next() => item,
            };
            match item {
                None => return None,
                Some(Followed::Resync) => self.resync_since = Some(self.last),
                Some(Followed::Changed(changed)) => self.show(&changed),
            }
        }
    }
}
