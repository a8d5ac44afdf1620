//! Idempotent creates in memory: the task a key names, found under the one
//! lock, so concurrent creates with one key make one task.

use std::time::Duration;

use super::state::State;
use crate::domain::{IdempotencyKey, KeyedCreate, KeyedTask, Replay, Scope, Task, replay};
use crate::error::{Refusal, StoreError};

/// What a create carrying `key` answers with instead of creating: the
/// task the key names (`Some`), or `None` when the key is free (a key whose
/// retention has passed is freed here, so that it names one task at most).
pub(super) fn replayed(
    state: &mut State,
    scope: &Scope,
    key: &IdempotencyKey,
    request: &crate::domain::JsonObject,
    retention: Duration,
) -> Result<Option<Task>, StoreError> {
    let now = state.now();
    // A scan, as the quota counts are: the in-memory engine serves `dev`
    // and tests, where a create among many thousands of tasks is rare.
    let Some((task_key, record)) = state.tasks.iter().find(|(task_key, record)| {
        task_key.0 == scope.tenant.as_str()
            && record.idempotency_key.as_ref() == Some(key)
            && record.is_live(now)
    }) else {
        return Ok(None);
    };
    let decision = replay(
        KeyedTask {
            created_at: record.task.created_at,
            session: record.task.session_id.as_ref(),
            request: &record.request,
        },
        KeyedCreate {
            session: scope.session.as_ref(),
            request,
            now,
            retention,
        },
    );
    match decision {
        Replay::Existing => Ok(Some(record.task.clone())),
        Replay::InUse => Err(StoreError::FailedPrecondition(Refusal::IdempotencyKeyInUse)),
        Replay::Expired => {
            let task_key = task_key.clone();
            if let Some(record) = state.tasks.get_mut(&task_key) {
                record.idempotency_key = None;
            }
            state.touch(&task_key);
            Ok(None)
        }
    }
}
