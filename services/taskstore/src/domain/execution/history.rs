//! The attempt history of a task: who ran each attempt, when, and how it
//! ended, for the dashboard's timeline. It is kept in the task (a field of
//! the record, a column of the row), so it expires and is deleted with it,
//! and it is capped, so a task retried without end costs a bounded amount.
//! The rule is here once; the in-process engine calls it, PostgreSQL
//! restates it in its statements (`store/postgres/history.rs`, tested to
//! agree), and both keep the same JSON.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::{AttemptEnd, ReleaseReason};
use crate::domain::TaskStatus;

/// The most attempt records a task keeps: the oldest are dropped, and
/// counted, beyond it.
pub const MAX_ATTEMPT_RECORDS: usize = 20;
/// The longest message an end keeps, in characters (a retryable error can
/// be as long as a release's message; the history only needs its start).
pub const MAX_END_MESSAGE_CHARS: usize = 200;

impl AttemptEnd {
    /// The end of an attempt its worker released for `reason`, saying
    /// `message`.
    pub fn of_release(reason: ReleaseReason, message: &str) -> Self {
        match reason {
            ReleaseReason::RetryableError => AttemptEnd::RetryableFailure {
                error: message.to_owned(),
            },
            ReleaseReason::Shutdown => AttemptEnd::Shutdown,
            ReleaseReason::Parked => AttemptEnd::Parked,
            ReleaseReason::BackOff { wait } => AttemptEnd::BackOff {
                wait,
                message: message.to_owned(),
            },
        }
    }

    /// Its name, in metrics and in the stored history.
    pub fn cause(&self) -> &'static str {
        match self {
            AttemptEnd::RetryableFailure { .. } => "retryable_error",
            AttemptEnd::Shutdown => "shutdown",
            AttemptEnd::LeaseExpired => "lease_expired",
            AttemptEnd::BackOff { .. } => "back_off",
            AttemptEnd::Parked => "parked",
        }
    }
}

/// How a recorded attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "StoredOutcome", try_from = "StoredOutcome")]
pub enum AttemptOutcome {
    /// The task reached a terminal status while the attempt ran: its result
    /// was stored (completed or failed, with the message given with it), or
    /// it was cancelled.
    Finished {
        status: TaskStatus,
        message: Option<String>,
    },
    /// It ended without a result: given back, or its lease ran out.
    WithoutResult(AttemptEnd),
}

impl AttemptOutcome {
    /// The kind, as stored: a terminal status, or [`AttemptEnd::cause`].
    pub fn kind(&self) -> &'static str {
        match self {
            AttemptOutcome::Finished { status, .. } => status.as_str(),
            AttemptOutcome::WithoutResult(end) => end.cause(),
        }
    }

    /// What it said, if anything: the result's message, the retryable
    /// error.
    pub fn message(&self) -> Option<&str> {
        match self {
            AttemptOutcome::Finished { message, .. } => message.as_deref(),
            AttemptOutcome::WithoutResult(AttemptEnd::RetryableFailure { error }) => Some(error),
            AttemptOutcome::WithoutResult(AttemptEnd::BackOff { message, .. }) => Some(message),
            AttemptOutcome::WithoutResult(_) => None,
        }
    }

    /// The outcome with its message cut to [`MAX_END_MESSAGE_CHARS`].
    fn bounded(self) -> Self {
        let cut = |text: String| match text.char_indices().nth(MAX_END_MESSAGE_CHARS) {
            Some((at, _)) => text[..at].to_owned(),
            None => text,
        };
        match self {
            AttemptOutcome::Finished { status, message } => AttemptOutcome::Finished {
                status,
                message: message.map(cut),
            },
            AttemptOutcome::WithoutResult(AttemptEnd::RetryableFailure { error }) => {
                AttemptOutcome::WithoutResult(AttemptEnd::RetryableFailure { error: cut(error) })
            }
            AttemptOutcome::WithoutResult(AttemptEnd::BackOff { wait, message }) => {
                AttemptOutcome::WithoutResult(AttemptEnd::BackOff {
                    wait,
                    message: cut(message),
                })
            }
            other => other,
        }
    }
}

/// The stored form of an [`AttemptOutcome`]: `{"kind": …, "message": …}`,
/// as PostgreSQL's statements write it too.
#[derive(Serialize, Deserialize)]
struct StoredOutcome {
    kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

impl From<AttemptOutcome> for StoredOutcome {
    fn from(outcome: AttemptOutcome) -> Self {
        Self {
            kind: outcome.kind().to_owned(),
            message: outcome.message().map(str::to_owned),
        }
    }
}

impl TryFrom<StoredOutcome> for AttemptOutcome {
    type Error = String;

    fn try_from(stored: StoredOutcome) -> Result<Self, String> {
        let end = match stored.kind.as_str() {
            "retryable_error" => AttemptEnd::RetryableFailure {
                error: stored.message.unwrap_or_default(),
            },
            "shutdown" => AttemptEnd::Shutdown,
            "lease_expired" => AttemptEnd::LeaseExpired,
            "parked" => AttemptEnd::Parked,
            // How long it waited is in the task's status message, not here.
            "back_off" => AttemptEnd::BackOff {
                wait: std::time::Duration::ZERO,
                message: stored.message.unwrap_or_default(),
            },
            kind => {
                let status: TaskStatus = kind
                    .parse()
                    .ok()
                    .filter(|s: &TaskStatus| s.is_terminal())
                    .ok_or_else(|| format!("unknown attempt end {kind:?}"))?;
                return Ok(AttemptOutcome::Finished {
                    status,
                    message: stored.message,
                });
            }
        };
        Ok(AttemptOutcome::WithoutResult(end))
    }
}

/// One attempt: its number, the worker (or holder) whose lease it ran
/// under, and its end once it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttemptRecord {
    pub attempt: u32,
    pub worker: String,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<DateTime<Utc>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<AttemptOutcome>,
}

/// A task's attempts, oldest first, at most [`MAX_ATTEMPT_RECORDS`], and
/// how many older ones were dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptHistory {
    #[serde(default)]
    pub dropped: u64,
    #[serde(default)]
    pub records: Vec<AttemptRecord>,
}

impl AttemptHistory {
    pub fn is_empty(&self) -> bool {
        self.dropped == 0 && self.records.is_empty()
    }

    /// Attempt `attempt` started on `worker` at `at`: appended, and the
    /// oldest records dropped (and counted) beyond the cap.
    pub fn started(&mut self, attempt: u32, worker: &str, at: DateTime<Utc>) {
        self.records.push(AttemptRecord {
            attempt,
            worker: worker.to_owned(),
            started_at: at,
            ended_at: None,
            end: None,
        });
        let excess = self.records.len().saturating_sub(MAX_ATTEMPT_RECORDS);
        self.records.drain(..excess);
        self.dropped = self.dropped.saturating_add(excess as u64);
    }

    /// The attempt running now ended at `at` as `outcome`: the open record
    /// (the last, if it has no end) is closed. Nothing changes when no
    /// attempt is open (a task cancelled before any claim).
    pub fn ended(&mut self, outcome: AttemptOutcome, at: DateTime<Utc>) {
        if let Some(open) = self.records.last_mut().filter(|r| r.ended_at.is_none()) {
            open.ended_at = Some(at);
            open.end = Some(outcome.bounded());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_764_000_000 + second, 0).expect("a valid instant")
    }

    #[test]
    fn a_start_appends_and_an_end_closes_the_open_attempt() {
        let mut history = AttemptHistory::default();
        history.ended(AttemptOutcome::WithoutResult(AttemptEnd::Shutdown), at(0));
        assert!(history.is_empty(), "nothing open, nothing to close");
        history.started(1, "w1", at(1));
        let error = AttemptEnd::RetryableFailure {
            error: "timeout".into(),
        };
        history.ended(AttemptOutcome::WithoutResult(error.clone()), at(2));
        history.started(2, "w2", at(3));
        let done = AttemptOutcome::Finished {
            status: TaskStatus::Completed,
            message: None,
        };
        history.ended(done.clone(), at(4));
        history.ended(
            AttemptOutcome::WithoutResult(AttemptEnd::LeaseExpired),
            at(5),
        );
        assert_eq!(
            history.records,
            [
                AttemptRecord {
                    attempt: 1,
                    worker: "w1".into(),
                    started_at: at(1),
                    ended_at: Some(at(2)),
                    end: Some(AttemptOutcome::WithoutResult(error)),
                },
                AttemptRecord {
                    attempt: 2,
                    worker: "w2".into(),
                    started_at: at(3),
                    ended_at: Some(at(4)),
                    end: Some(done),
                },
            ],
            "a closed attempt is not closed again"
        );
        assert_eq!(history.dropped, 0);
    }

    #[test]
    fn the_newest_are_kept_and_the_dropped_counted() {
        let mut history = AttemptHistory::default();
        for n in 1..=25 {
            history.started(n, "w", at(i64::from(n)));
            history.ended(AttemptOutcome::WithoutResult(AttemptEnd::Shutdown), at(99));
        }
        assert_eq!(history.records.len(), MAX_ATTEMPT_RECORDS);
        assert_eq!(history.dropped, 5);
        assert_eq!(history.records[0].attempt, 6);
        assert_eq!(history.records[19].attempt, 25);
    }

    #[test]
    fn messages_are_cut_and_the_stored_form_round_trips() {
        let mut history = AttemptHistory::default();
        history.started(1, "w", at(1));
        let long = "é".repeat(MAX_END_MESSAGE_CHARS + 50);
        history.ended(
            AttemptOutcome::WithoutResult(AttemptEnd::RetryableFailure { error: long }),
            at(2),
        );
        let end = history.records[0].end.as_ref().expect("ended");
        assert_eq!(
            end.message().map(|m| m.chars().count()),
            Some(MAX_END_MESSAGE_CHARS)
        );
        let json = serde_json::to_string(&history).expect("serialize");
        assert!(json.contains(r#""kind":"retryable_error""#), "{json}");
        let back: AttemptHistory = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, history);
        // As PostgreSQL writes it: offsets, microseconds, no message key.
        let pg = r#"{"dropped": 2, "records": [{"attempt": 3, "worker": "w",
            "startedAt": "2025-11-24T16:00:00.123456+01:00",
            "endedAt": "2025-11-24T16:00:01+01:00", "end": {"kind": "cancelled"}},
            {"attempt": 4, "worker": "w", "startedAt": "2025-11-24T16:00:02+00:00"}]}"#;
        let read: AttemptHistory = serde_json::from_str(pg).expect("PostgreSQL's form");
        assert_eq!(read.dropped, 2);
        assert_eq!(
            read.records[0].end,
            Some(AttemptOutcome::Finished {
                status: TaskStatus::Cancelled,
                message: None
            })
        );
        assert_eq!(read.records[1].end, None);
        assert!(serde_json::from_str::<AttemptOutcome>(r#"{"kind":"working"}"#).is_err());
    }
}
