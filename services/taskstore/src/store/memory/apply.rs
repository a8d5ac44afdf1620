//! The one place the in-memory store applies a decision's [`Effects`] to a
//! task (PostgreSQL's is `store/postgres/apply.rs`). The caller holds the
//! lock, commits, and announces the change.

use chrono::{DateTime, Utc};

use super::state::{Dispatch, Key, Lease, State, delta};
use crate::domain::{DispatchChange, Effects, LeaseChange, RetryPolicy};

/// Applies `effects` to the task under `key` at `now`; false when there is
/// nothing to apply (no such task, or no change).
pub(super) fn apply(state: &mut State, key: &Key, effects: &Effects, now: DateTime<Utc>) -> bool {
    if effects.is_none() {
        return false;
    }
    if matches!(effects.lease, LeaseChange::Grant(_)) {
        state.leased.insert(key.clone());
    }
    let Some(record) = state.tasks.get_mut(key) else {
        return false;
    };
    if let Some(outcome) = &effects.attempt_ended {
        record.attempts.ended(outcome.clone(), now);
    }
    if let LeaseChange::Grant(grant) = &effects.lease {
        // A first hold makes a task of one attempt that no job dispatches.
        if record.dispatch.is_none()
            && let Some(tool) = record.task.tool.clone()
        {
            record.dispatch = Some(Dispatch {
                limit: None,
                rate: None,
                fairness: None,
                slot: None,
                tool,
                max_attempts: 1,
                attempt: 0,
                generation: 1,
                lease: None,
                parked: false,
                retry: RetryPolicy::default(),
                priority: Default::default(),
            });
        }
        record.attempts.started(grant.attempt, &grant.owner, now);
    }
    let mut job = None;
    if let Some(dispatch) = record.dispatch.as_mut() {
        match &effects.lease {
            LeaseChange::Keep => {}
            LeaseChange::Clear => dispatch.lease = None,
            LeaseChange::Grant(grant) => {
                dispatch.lease = Some(Lease {
                    token: grant.token.clone(),
                    owner: grant.owner.clone(),
                    expires_at: now + delta(grant.duration),
                    session: grant.session.clone(),
                });
                dispatch.attempt = grant.attempt;
            }
        }
        if let Some(attempts) = effects.attempts {
            dispatch.attempt = attempts;
        }
        if let Some(max_attempts) = effects.max_attempts {
            dispatch.max_attempts = max_attempts;
        }
        match effects.dispatch {
            DispatchChange::Keep => {}
            DispatchChange::Again { after } => {
                dispatch.generation += 1;
                dispatch.parked = false;
                job = Some((dispatch.generation, dispatch.tool.clone(), after));
            }
            DispatchChange::Park => {
                dispatch.generation += 1;
                dispatch.parked = true;
            }
        }
    }
    if let Some(result) = &effects.result {
        record.result = Some(result.clone());
    }
    let message = effects.message.clone();
    match effects.status {
        Some(status) => {
            let message = message.unwrap_or_else(|| record.task.status_message.clone());
            record.transition(status, message, now);
        }
        None => {
            if let Some(message) = message {
                record.task.status_message = message;
            }
            record.task.last_updated_at = now;
        }
    }
    state.touch(key);
    if let Some((generation, tool, after)) = job {
        state.enqueue(key.clone(), generation, &tool, now + delta(after));
    }
    true
}
