//! The synchronous tool calls this replica is running, by the request that
//! made them, so that the client's `notifications/cancelled` for that
//! request cancels its task. (A cancellation that reaches another replica
//! finds nothing here; the call's own connection closing cancels it too.)

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use crate::domain::{Scope, TaskId};

/// A request as its client names it: the tenant and session it came in, and
/// its JSON-RPC id (as JSON text).
type Key = (String, Option<String>, String);

#[derive(Debug, Default)]
pub(super) struct InFlight {
    calls: Mutex<HashMap<Key, TaskId>>,
}

fn key(scope: &Scope, request_id: &str) -> Key {
    (
        scope.tenant.as_str().to_owned(),
        scope.session.as_ref().map(|s| s.as_str().to_owned()),
        request_id.to_owned(),
    )
}

impl InFlight {
    pub(super) fn insert(&self, scope: &Scope, request_id: &str, task: TaskId) {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key(scope, request_id), task);
    }

    pub(super) fn remove(&self, scope: &Scope, request_id: &str) -> Option<TaskId> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&key(scope, request_id))
    }
}
