//! The synchronous tool calls this replica is running. Each runs through a
//! task nobody else knows the id of, so the call owns it: the task is
//! cancelled when the call is abandoned (its client goes away, its wait runs
//! out, the gateway stops) and when the client sends
//! `notifications/cancelled` for the request. (A notification that reaches
//! another replica finds nothing here; the abandoned connection still
//! cancels the task.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio_util::task::TaskTracker;

use crate::domain::{Revision, Scope, TaskId};
use crate::store::TaskStore;

/// A request as its client names it: who sent it (the credentials'
/// subject), in which revision, tenant and session, and its JSON-RPC id (as
/// JSON text). Request ids are only unique per client, hence the rest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct CallKey {
    subject: String,
    revision: Revision,
    tenant: String,
    session: Option<String>,
    request_id: String,
}

impl CallKey {
    pub(super) fn new(subject: &str, revision: Revision, scope: &Scope, request_id: &str) -> Self {
        Self {
            subject: subject.to_owned(),
            revision,
            tenant: scope.tenant.as_str().to_owned(),
            session: scope.session.as_ref().map(|s| s.as_str().to_owned()),
            request_id: request_id.to_owned(),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct InFlight {
    calls: Arc<Mutex<HashMap<CallKey, (Scope, TaskId)>>>,
    /// The cancellations of abandoned calls, waited for when the gateway
    /// stops (before the store closes).
    cancels: TaskTracker,
}

impl InFlight {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<CallKey, (Scope, TaskId)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a running call; dropping the returned guard deregisters
    /// it and, unless [`CallGuard::finished`] was called, cancels its task.
    pub(super) fn start(
        &self,
        key: CallKey,
        scope: &Scope,
        task_id: &TaskId,
        store: Arc<dyn TaskStore>,
    ) -> CallGuard {
        self.calls()
            .insert(key.clone(), (scope.clone(), task_id.clone()));
        CallGuard {
            in_flight: self.clone(),
            key,
            store,
            finished: false,
        }
    }

    /// The client cancelled request `key`: cancel its task if it runs here.
    pub(super) fn cancel(&self, key: &CallKey, store: Arc<dyn TaskStore>) {
        if let Some((scope, task_id)) = self.calls().remove(key) {
            self.spawn_cancel(store, scope, task_id, "mcp client cancelled its call");
        }
    }

    fn spawn_cancel(
        &self,
        store: Arc<dyn TaskStore>,
        scope: Scope,
        task_id: TaskId,
        why: &'static str,
    ) {
        self.cancels.spawn(async move {
            match store.cancel_task(&scope, &task_id).await {
                Ok(task) => tracing::info!(task_id = %task_id, status = %task.status, reason = why, "synchronous call's task cancelled"),
                Err(err) => tracing::warn!(task_id = %task_id, error = %err, reason = why, "could not cancel a synchronous call's task"),
            }
        });
    }

    /// Waits for the cancellations still under way (at shutdown).
    pub(super) async fn settle(&self) {
        self.cancels.close();
        self.cancels.wait().await;
    }
}

/// A running synchronous call (see [`InFlight::start`]).
pub(super) struct CallGuard {
    in_flight: InFlight,
    key: CallKey,
    store: Arc<dyn TaskStore>,
    finished: bool,
}

impl CallGuard {
    /// The task ended (or was found ended): nothing to cancel.
    pub(super) fn finished(&mut self) {
        self.finished = true;
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let entry = self.in_flight.calls().remove(&self.key);
        if self.finished {
            return;
        }
        // Absent: a notification took it and is cancelling it already.
        if let Some((scope, task_id)) = entry {
            self.in_flight.spawn_cancel(
                self.store.clone(),
                scope,
                task_id,
                "synchronous call abandoned",
            );
        }
    }
}
