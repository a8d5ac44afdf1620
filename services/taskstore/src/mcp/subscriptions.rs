//! 2026-07-28 `subscriptions/listen` for `notifications/tasks`: the
//! request's response stream first acknowledges the task ids it accepted
//! (the caller's own tasks only; others are left out, exactly like ids that
//! never existed), then sends each accepted task as it is now and after
//! every change, made through any replica, as the `DetailedTask`
//! `tasks/get` would answer (the result inlined once it ended), each with
//! the subscription's id in `_meta`. It lasts until the client closes it;
//! when the gateway stops, it ends with the listen request's result, and
//! the client listens again elsewhere. This revision has no resumption.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use axum::response::Response;
use serde_json::{Map, Value, json};
use tokio_stream::StreamExt;

use super::call::Call;
use super::errors::missing_extension;
use super::gateway::Gateway;
use super::jsonrpc::{self, Id, RpcError, code};
use super::sse::{Event, EventSource, events_of, sse};
use super::tasks::detailed;
use crate::domain::{Task, TaskId};
use crate::edge::WaitingSlot;
use crate::error::StoreError;
use crate::store::{Followed, TaskFollow};

/// The `_meta` key naming the subscription (the listen request's id).
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The most task ids one listen may name.
pub(super) const MAX_TASK_IDS: usize = 100;

/// Opens the subscription: its response stream.
pub(super) async fn listen(
    gateway: &Arc<Gateway>,
    call: &Call,
    params: &Map<String, Value>,
) -> Result<Response, RpcError> {
    let requested = task_ids(params)?;
    if !requested.is_empty() && !call.tasks_extension {
        return Err(missing_extension());
    }
    let id = call.id.clone().ok_or_else(|| {
        RpcError::new(
            code::INVALID_REQUEST,
            "subscriptions/listen must be a request",
        )
    })?;
    let slot = gateway.admissions.hold_waiting(&call.scope.tenant)?;
    // Followed before the tasks are read, so that nothing falls between.
    let follow = gateway.store.follow_tasks(&call.scope).await?;
    let mut accepted: Vec<Task> = Vec::new();
    for raw in requested {
        let Ok(task_id) = TaskId::parse(&raw) else {
            continue;
        };
        if accepted.iter().any(|task| task.task_id == task_id) {
            continue;
        }
        match gateway.store.get_task(&call.scope, &task_id).await {
            Ok(task) => accepted.push(task),
            Err(StoreError::NotFound) => {}
            Err(err) => return Err(err.into()),
        }
    }
    let ids: Vec<&str> = accepted.iter().map(|t| t.task_id.as_str()).collect();
    let acknowledged = json!({
        "jsonrpc": "2.0",
        "method": "notifications/subscriptions/acknowledged",
        "params": {
            "notifications": { "taskIds": ids },
            "_meta": { SUBSCRIPTION_ID: id.as_json() },
        },
    });
    tracing::info!(tasks = accepted.len(), "mcp subscription opened");
    let mut subscription = Subscription {
        gateway: gateway.clone(),
        call: call.clone(),
        id,
        follow,
        sent: HashMap::new(),
        pending: VecDeque::from([Event::default().data(acknowledged.to_string())]),
        current: accepted.into_iter().collect(),
        ended: false,
        _slot: slot,
    };
    subscription.sent = subscription
        .current
        .iter()
        .map(|task| (task.task_id.clone(), None))
        .collect();
    Ok(sse(events_of(subscription)))
}

/// `params.notifications.taskIds`, checked for shape.
fn task_ids(params: &Map<String, Value>) -> Result<Vec<String>, RpcError> {
    let filter = params
        .get("notifications")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid_params("params.notifications must be an object"))?;
    let shape = || {
        RpcError::invalid_params(format!(
            "params.notifications.taskIds must be an array of at most {MAX_TASK_IDS} strings"
        ))
    };
    match filter.get("taskIds") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(ids)) if ids.len() <= MAX_TASK_IDS => ids
            .iter()
            .map(|id| id.as_str().map(str::to_owned).ok_or_else(shape))
            .collect(),
        Some(_) => Err(shape()),
    }
}

struct Subscription {
    gateway: Arc<Gateway>,
    call: Call,
    id: Id,
    follow: TaskFollow,
    /// The accepted tasks, and the last state sent of each.
    sent: HashMap<TaskId, Option<Task>>,
    pending: VecDeque<Event>,
    /// Tasks to send as they are now (at the start, and after a resync).
    current: VecDeque<Task>,
    ended: bool,
    _slot: WaitingSlot,
}

impl Subscription {
    /// `notifications/tasks` for `task`, unless it was just sent as it is.
    async fn notify(&mut self, task: Task) -> Option<Event> {
        let last = self.sent.get_mut(&task.task_id)?;
        if last.as_ref() == Some(&task) {
            return None;
        }
        *last = Some(task.clone());
        let mut params = match detailed(&self.gateway, &self.call, task).await {
            Ok(Value::Object(params)) => params,
            Ok(_) => return None,
            Err(err) => {
                tracing::warn!(error = %err.message, "a subscribed task could not be read; skipped");
                return None;
            }
        };
        params.insert(
            "_meta".into(),
            json!({ SUBSCRIPTION_ID: self.id.as_json() }),
        );
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tasks",
            "params": params,
        });
        Some(Event::default().data(message.to_string()))
    }

    /// The listen request's result: the subscription ended gracefully.
    fn ending(&mut self) -> Event {
        self.ended = true;
        let result = json!({
            "resultType": "complete",
            "_meta": { SUBSCRIPTION_ID: self.id.as_json() },
        });
        Event::default().data(jsonrpc::response(Some(&self.id), Ok(result)).to_string())
    }

    async fn resync(&mut self) {
        let ids: Vec<TaskId> = self.sent.keys().cloned().collect();
        for task_id in ids {
            match self
                .gateway
                .store
                .get_task(&self.call.scope, &task_id)
                .await
            {
                Ok(task) => self.current.push_back(task),
                Err(err) => {
                    tracing::debug!(error = %err, task_id = %task_id, "subscribed task not read at resync")
                }
            }
        }
    }
}

impl EventSource for Subscription {
    async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            if let Some(task) = self.current.pop_front() {
                if let Some(event) = self.notify(task).await {
                    return Some(event);
                }
                continue;
            }
            let item = tokio::select! {
                () = self.gateway.shutdown.cancelled() => return Some(self.ending()),
                item = self.follow.next() => item,
            };
            match item {
                None => return Some(self.ending()),
                Some(Followed::Resync) => self.resync().await,
                Some(Followed::Changed(changed)) => {
                    if self.sent.contains_key(&changed.task.task_id)
                        && let Some(event) = self.notify(changed.task.clone()).await
                    {
                        return Some(event);
                    }
                }
            }
        }
    }
}
