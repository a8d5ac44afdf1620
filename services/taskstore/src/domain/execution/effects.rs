//! What a decision changes, as data. A decision (`after_attempt`, ...)
//! says what happens; [`Effects`] says what that does to the task's row,
//! once, here; each backend applies an `Effects` in one place
//! (`store/memory/apply.rs`, `store/postgres/apply.rs`). A new rule is a
//! new decision or a new field here, never a new write in a backend.
//!
//! Every applied `Effects` that changes anything moves the task's
//! `last_updated_at` and announces the change (the backends' feeds; the
//! conformance case `announced` holds them to it).

use std::time::Duration;

use super::{
    AttemptEnd, AttemptOutcome, LeaseToken, NextStep, error_result, running_message,
    waiting_for_worker_message,
};
use crate::domain::{JsonObject, TaskStatus};

/// What becomes of the task's lease.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LeaseChange {
    #[default]
    Keep,
    /// No attempt holds the task any more.
    Clear,
    /// A new attempt holds it (a claim, a first hold).
    Grant(LeaseGrant),
}

/// A lease granted to a new attempt: its record starts with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseGrant {
    pub token: LeaseToken,
    /// The worker or holder running the attempt.
    pub owner: String,
    /// How long the lease lasts unless renewed.
    pub duration: Duration,
    /// The attempt's number, which becomes the task's count of attempts.
    pub attempt: u32,
    /// The worker session it was claimed in, which keeps it alive while
    /// the session is renewed (`None`: its own lease must be renewed).
    pub session: Option<super::WorkerSession>,
}

/// What becomes of the task's dispatch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DispatchChange {
    #[default]
    Keep,
    /// A new generation, whose job is due after this delay (a parked
    /// task's park ends).
    Again { after: Duration },
    /// A new generation and no job (so no job of the old one can claim
    /// it): the task waits for answers (`questions::after_answers`).
    Park,
}

/// The changes to one task. `None` and `Keep` leave a part as it is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Effects {
    /// The new status; a terminal one re-arms the expiry to at least the
    /// task's ttl from now.
    pub status: Option<TaskStatus>,
    /// The new status message (`Some(None)` clears it).
    pub message: Option<Option<String>>,
    /// The result stored with a terminal status.
    pub result: Option<JsonObject>,
    pub lease: LeaseChange,
    /// The task's count of attempts used.
    pub attempts: Option<u32>,
    /// The most attempts the task may have (a held task: one).
    pub max_attempts: Option<u32>,
    pub dispatch: DispatchChange,
    /// The open attempt's record ends so.
    pub attempt_ended: Option<AttemptOutcome>,
    /// The task changes even when nothing above does: its last update
    /// moves and its watchers hear of it (an attempt waiting for answers
    /// learns that some came).
    pub touch: bool,
}

impl Effects {
    /// Whether applying them changes nothing.
    pub fn is_none(&self) -> bool {
        self == &Effects::default()
    }

    /// These, or (when they change nothing) a touch.
    pub fn or_touch(self) -> Effects {
        Effects {
            touch: true,
            ..self
        }
    }

    /// A new attempt (number `grant.attempt` of `max_attempts`) starts
    /// under `grant`: the lease, the attempt's record, and the message
    /// saying who runs it.
    pub fn of_grant(grant: LeaseGrant, max_attempts: u32) -> Effects {
        Effects {
            message: Some(Some(running_message(
                &grant.owner,
                grant.attempt,
                max_attempts,
            ))),
            lease: LeaseChange::Grant(grant),
            ..Effects::default()
        }
    }

    /// No worker serves the task's `tool` yet: its message says so
    /// (nothing, when it says so already).
    pub fn of_waiting_for_worker(message: Option<&str>, tool: &str) -> Effects {
        let note = waiting_for_worker_message(tool);
        if message == Some(note.as_str()) {
            return Effects::default();
        }
        Effects {
            message: Some(Some(note)),
            ..Effects::default()
        }
    }

    /// What a report (a status update, or a result with its terminal
    /// status) does: the status and message, the result, and, when the
    /// task ends, the end of the attempt running it.
    pub fn of_report(
        status: TaskStatus,
        message: Option<String>,
        result: Option<JsonObject>,
    ) -> Effects {
        let attempt_ended = status.is_terminal().then(|| AttemptOutcome::Finished {
            status,
            message: message.clone(),
        });
        Effects {
            status: Some(status),
            message: Some(message),
            result,
            attempt_ended,
            ..Effects::default()
        }
    }

    /// What ending an attempt (`end`) as the decision `next` says does.
    pub fn of_attempt_end(next: &NextStep, end: &AttemptEnd) -> Effects {
        let ended = Some(AttemptOutcome::WithoutResult(end.clone()));
        match next {
            NextStep::Redispatch {
                attempts,
                delay,
                message,
            } => Effects {
                message: Some(Some(message.clone())),
                lease: LeaseChange::Clear,
                attempts: Some(*attempts),
                dispatch: DispatchChange::Again { after: *delay },
                attempt_ended: ended,
                ..Effects::default()
            },
            // It keeps its status and message: what it asks.
            NextStep::Park { attempts } => Effects {
                lease: LeaseChange::Clear,
                attempts: Some(*attempts),
                dispatch: DispatchChange::Park,
                attempt_ended: ended,
                ..Effects::default()
            },
            NextStep::Fail { message } => Effects {
                status: Some(TaskStatus::Failed),
                message: Some(Some(message.clone())),
                // Our own JSON: it always parses.
                result: JsonObject::parse(error_result(message)).ok(),
                lease: LeaseChange::Clear,
                attempt_ended: ended,
                ..Effects::default()
            },
            NextStep::Unchanged => Effects::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_end_of_an_attempt_clears_its_lease_and_ends_its_record() {
        let end = AttemptEnd::LeaseExpired;
        let steps = [
            NextStep::Redispatch {
                attempts: 1,
                delay: Duration::from_secs(2),
                message: "again".into(),
            },
            NextStep::Park { attempts: 0 },
            NextStep::Fail {
                message: "failed".into(),
            },
        ];
        for next in &steps {
            let effects = Effects::of_attempt_end(next, &end);
            assert_eq!(effects.lease, LeaseChange::Clear, "{next:?}");
            assert_eq!(
                effects.attempt_ended,
                Some(AttemptOutcome::WithoutResult(end.clone()))
            );
        }
        let again = Effects::of_attempt_end(&steps[0], &end);
        assert_eq!(
            again.dispatch,
            DispatchChange::Again {
                after: Duration::from_secs(2)
            }
        );
        assert_eq!(again.status, None, "a retry keeps its status");
        let parked = Effects::of_attempt_end(&steps[1], &end);
        assert_eq!(
            (parked.dispatch, parked.message),
            (DispatchChange::Park, None)
        );
        let failed = Effects::of_attempt_end(&steps[2], &end);
        assert_eq!(failed.status, Some(TaskStatus::Failed));
        assert_eq!(
            failed.result.as_ref().map(JsonObject::as_str),
            Some(error_result("failed").as_str())
        );
        assert_eq!(failed.dispatch, DispatchChange::Keep);
        assert!(Effects::of_attempt_end(&NextStep::Unchanged, &end).is_none());
    }
}
