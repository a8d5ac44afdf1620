//! The execution protocol's decisions, as pure functions every backend
//! calls, so that PostgreSQL and the in-process engine cannot disagree:
//! what the end (or loss) of an attempt means for its task, and why a claim
//! or a fenced report is refused. The backends only read the state, apply
//! the decision atomically, and write the job it asks for.

use std::time::Duration;

#[cfg(test)]
use super::refusals::{ClaimRefusal, FenceRefusal};
use super::retry::RetryPolicy;
use super::{ExecutionPolicy, ReleaseOutcome};
use crate::domain::TaskStatus;

/// What the service knows of a dispatched task when one of its attempts
/// ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptState {
    pub status: TaskStatus,
    /// Attempts claimed so far, the one that ended included.
    pub attempt: u32,
    pub max_attempts: u32,
    /// The worker that held the lease (for the status message).
    pub owner: String,
    /// Questions of the task still waiting for an answer.
    pub open_questions: usize,
    /// What its tool declared when the task was created.
    pub retry: RetryPolicy,
}

/// How an attempt ended without a result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    /// The tool failed in a way a retry may fix; the worker gave it back.
    RetryableFailure { error: String },
    /// The worker shut down before the tool finished and gave it back.
    Shutdown,
    /// The lease ran out: the worker crashed, froze, or was cut off.
    LeaseExpired,
    /// The tool waited for an answer longer than its worker holds a slot
    /// for one: the attempt gives the task back until the answer comes.
    Parked,
    /// The tool was told to wait `wait` (saying `message`): the attempt is
    /// given back, and the task runs again after it.
    BackOff { wait: Duration, message: String },
}

/// What becomes of the task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NextStep {
    /// Dispatch again: a new generation whose job is due after `delay`; the
    /// task's attempt count becomes `attempts` and its status message
    /// `message`.
    Redispatch {
        attempts: u32,
        delay: Duration,
        message: String,
    },
    /// Out of attempts: FAILED, with an error result that says `message`.
    Fail { message: String },
    /// Parked: no attempt holds the task and no job is queued for it; it
    /// keeps its status and message (what it asks) and its attempt count
    /// becomes `attempts`. The answer that completes its questions
    /// dispatches it again (`questions::after_answers`).
    Park { attempts: u32 },
    /// The task is terminal already: nothing changes.
    Unchanged,
}

impl NextStep {
    /// What the worker that released the task is told.
    pub fn outcome(&self) -> Option<ReleaseOutcome> {
        match self {
            NextStep::Redispatch { delay, .. } => Some(ReleaseOutcome::Retry { after: *delay }),
            NextStep::Fail { .. } => Some(ReleaseOutcome::Failed),
            NextStep::Park { .. } => Some(ReleaseOutcome::Parked),
            NextStep::Unchanged => None,
        }
    }
}

/// The decision for an attempt that ended without a result. `jitter` is a
/// value in `[0, 1)` ([`ExecutionPolicy::jitter`]), given so that the
/// decision stays a pure function.
pub fn after_attempt(
    state: &AttemptState,
    end: &AttemptEnd,
    policy: &ExecutionPolicy,
    jitter: f64,
) -> NextStep {
    if state.status.is_terminal() {
        return NextStep::Unchanged;
    }
    let (attempt, max) = (state.attempt, state.max_attempts);
    let owner = &state.owner;
    let more_left = attempt < max;
    match end {
        // Waiting for a person is not the tool's fault either: the attempt
        // is given back, and the task waits without a worker.
        AttemptEnd::Parked if state.open_questions > 0 => NextStep::Park {
            attempts: attempt.saturating_sub(1),
        },
        // Answered while the worker decided to park: it goes on at once.
        AttemptEnd::Parked => NextStep::Redispatch {
            attempts: attempt.saturating_sub(1),
            delay: Duration::ZERO,
            message: crate::domain::questions::RESUMED_MESSAGE.to_owned(),
        },
        // Told to wait by what it calls: not a failure, and no attempt
        // spent (the key's other tasks wait too: the store pauses it).
        AttemptEnd::BackOff { wait, message } => {
            let wait_for = humantime::format_duration(Duration::from_secs(wait.as_secs()));
            NextStep::Redispatch {
                attempts: attempt.saturating_sub(1),
                delay: *wait,
                message: if message.is_empty() {
                    format!("backing off for {wait_for}")
                } else {
                    format!("backing off for {wait_for}: {message}")
                },
            }
        }
        // Not the tool's fault: the attempt is given back.
        AttemptEnd::Shutdown => NextStep::Redispatch {
            attempts: attempt.saturating_sub(1),
            delay: Duration::ZERO,
            message: format!("requeued: the worker running it ({owner}) shut down"),
        },
        AttemptEnd::RetryableFailure { error } if !state.retry.retry_errors => NextStep::Fail {
            message: format!("failed: {error} (its tool retries no errors)"),
        },
        AttemptEnd::RetryableFailure { error } if more_left => {
            let delay = state.retry.backoff(policy, attempt, jitter);
            let after = humantime::format_duration(Duration::from_millis(
                u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            ));
            NextStep::Redispatch {
                attempts: attempt,
                delay,
                message: format!("attempt {attempt} of {max} failed: {error}; retrying in {after}"),
            }
        }
        AttemptEnd::RetryableFailure { error } => NextStep::Fail {
            message: format!("failed after {max} attempts: {error}"),
        },
        AttemptEnd::LeaseExpired if !state.retry.retry_lost_workers => NextStep::Fail {
            message: format!(
                "failed: the worker running it ({owner}) stopped renewing its lease, and its tool does not run a task again after a lost worker"
            ),
        },
        AttemptEnd::LeaseExpired if more_left => NextStep::Redispatch {
            attempts: attempt,
            delay: Duration::ZERO,
            message: format!(
                "attempt {attempt} of {max}: the worker running it ({owner}) stopped renewing its lease; dispatched again"
            ),
        },
        // One attempt only: a held task (its caller's own process ran it)
        // or a tool allowed no retry.
        AttemptEnd::LeaseExpired if max == 1 => NextStep::Fail {
            message: format!(
                "failed: the process running it ({owner}) stopped renewing its lease (it stopped, or lost its connection)"
            ),
        },
        AttemptEnd::LeaseExpired => NextStep::Fail {
            message: format!(
                "failed after {max} attempts: the worker running it ({owner}) stopped renewing its lease"
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn policy() -> ExecutionPolicy {
        ExecutionPolicy {
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            ..ExecutionPolicy::default()
        }
    }

    fn state(status: TaskStatus, attempt: u32, max_attempts: u32) -> AttemptState {
        AttemptState {
            status,
            attempt,
            max_attempts,
            owner: "w1".into(),
            open_questions: 0,
            retry: RetryPolicy::default(),
        }
    }

    #[test]
    fn a_back_off_spends_no_attempt_and_waits_as_long_as_told() {
        let told = AttemptEnd::BackOff {
            wait: Duration::from_secs(30),
            message: "429 from upstream".into(),
        };
        // Even on the last attempt, and for a tool that retries no errors.
        let last = AttemptState {
            retry: RetryPolicy {
                retry_errors: false,
                ..RetryPolicy::default()
            },
            ..state(TaskStatus::Working, 3, 3)
        };
        assert_eq!(
            after_attempt(&last, &told, &policy(), 0.5),
            NextStep::Redispatch {
                attempts: 2,
                delay: Duration::from_secs(30),
                message: "backing off for 30s: 429 from upstream".into()
            }
        );
    }

    #[test]
    fn a_parked_attempt_does_not_count_and_waits_for_its_answers() {
        let waiting = AttemptState {
            open_questions: 2,
            ..state(TaskStatus::InputRequired, 3, 3)
        };
        let policy = policy();
        assert_eq!(
            after_attempt(&waiting, &AttemptEnd::Parked, &policy, 0.5),
            NextStep::Park { attempts: 2 }
        );
        let answered = state(TaskStatus::Working, 1, 3);
        assert_eq!(
            after_attempt(&answered, &AttemptEnd::Parked, &policy, 0.5),
            NextStep::Redispatch {
                attempts: 0,
                delay: Duration::ZERO,
                message: crate::domain::questions::RESUMED_MESSAGE.into()
            }
        );
        assert_eq!(
            NextStep::Park { attempts: 0 }.outcome(),
            Some(ReleaseOutcome::Parked)
        );
    }

    fn retryable() -> AttemptEnd {
        AttemptEnd::RetryableFailure {
            error: "timeout".into(),
        }
    }

    #[test]
    fn the_decision_table() {
        use TaskStatus::{Cancelled, Completed, InputRequired, Working};
        let redispatch = |attempts, delay_ms, message: &str| NextStep::Redispatch {
            attempts,
            delay: Duration::from_millis(delay_ms),
            message: message.into(),
        };
        let fail = |message: &str| NextStep::Fail {
            message: message.into(),
        };
        let cases = [
            (
                state(Working, 1, 3),
                retryable(),
                redispatch(1, 500, "attempt 1 of 3 failed: timeout; retrying in 500ms"),
            ),
            (
                state(Working, 2, 3),
                retryable(),
                redispatch(2, 1000, "attempt 2 of 3 failed: timeout; retrying in 1s"),
            ),
            (
                state(InputRequired, 3, 3),
                retryable(),
                fail("failed after 3 attempts: timeout"),
            ),
            (
                state(Working, 1, 3),
                AttemptEnd::Shutdown,
                redispatch(0, 0, "requeued: the worker running it (w1) shut down"),
            ),
            (
                state(Working, 3, 3),
                AttemptEnd::Shutdown,
                redispatch(2, 0, "requeued: the worker running it (w1) shut down"),
            ),
            (
                state(Working, 1, 2),
                AttemptEnd::LeaseExpired,
                redispatch(
                    1,
                    0,
                    "attempt 1 of 2: the worker running it (w1) stopped renewing its lease; dispatched again",
                ),
            ),
            (
                state(Working, 2, 2),
                AttemptEnd::LeaseExpired,
                fail(
                    "failed after 2 attempts: the worker running it (w1) stopped renewing its lease",
                ),
            ),
            (state(Completed, 1, 3), retryable(), NextStep::Unchanged),
            (
                state(Cancelled, 1, 3),
                AttemptEnd::LeaseExpired,
                NextStep::Unchanged,
            ),
            (
                state(Cancelled, 1, 3),
                AttemptEnd::Shutdown,
                NextStep::Unchanged,
            ),
        ];
        for (state, end, expected) in cases {
            assert_eq!(
                after_attempt(&state, &end, &policy(), 0.0),
                expected,
                "{state:?} {end:?}"
            );
        }
        assert_eq!(
            after_attempt(&state(Working, 1, 3), &retryable(), &policy(), 0.0).outcome(),
            Some(ReleaseOutcome::Retry {
                after: Duration::from_millis(500)
            })
        );
        assert_eq!(
            after_attempt(&state(Working, 3, 3), &retryable(), &policy(), 0.0).outcome(),
            Some(ReleaseOutcome::Failed)
        );
    }

    #[test]
    fn refusals_name_their_reason() {
        use TaskStatus::{Cancelled, Working};
        assert_eq!(
            ClaimRefusal::explain(Cancelled, true, true, false),
            ClaimRefusal::Terminal(Cancelled)
        );
        assert_eq!(
            ClaimRefusal::explain(Working, false, false, false),
            ClaimRefusal::NotDispatched
        );
        assert_eq!(
            ClaimRefusal::explain(Working, true, false, true),
            ClaimRefusal::StaleJob
        );
        assert_eq!(
            ClaimRefusal::explain(Working, true, true, true),
            ClaimRefusal::AlreadyClaimed
        );
        assert_eq!(
            ClaimRefusal::explain(Working, true, true, false),
            ClaimRefusal::NotNow
        );
        assert_eq!(
            ClaimRefusal::StaleJob.to_string(),
            "stale job: the task was dispatched again since"
        );
        assert_eq!(
            FenceRefusal::explain(Cancelled).to_string(),
            "task is already cancelled"
        );
        assert_eq!(FenceRefusal::explain(Working), FenceRefusal::LeaseLost);
    }

    /// One step of a random history of a dispatched task.
    #[derive(Debug, Clone)]
    enum Event {
        /// A worker claims the task (when it is waiting for one).
        Claim,
        /// The running attempt ends without a result.
        End(AttemptEnd),
        /// The task reaches a terminal status another way (a result, a
        /// cancellation).
        Finish(TaskStatus),
        /// The running attempt asks a question.
        Ask,
        /// The questions are answered.
        Answer,
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            3 => Just(Event::Claim),
            2 => Just(Event::End(AttemptEnd::Shutdown)),
            3 => Just(Event::End(AttemptEnd::LeaseExpired)),
            3 => "[a-z]{0,8}".prop_map(|error| Event::End(AttemptEnd::RetryableFailure { error })),
            2 => Just(Event::End(AttemptEnd::Parked)),
            2 => Just(Event::Ask),
            2 => Just(Event::Answer),
            1 => prop_oneof![
                Just(TaskStatus::Completed),
                Just(TaskStatus::Failed),
                Just(TaskStatus::Cancelled),
            ]
            .prop_map(Event::Finish),
        ]
    }

    /// A dispatched task as the protocol moves it, with every decision
    /// taken by [`after_attempt`].
    #[derive(Debug, Clone)]
    struct Model {
        status: TaskStatus,
        attempts: u32,
        max_attempts: u32,
        running: bool,
        /// A question is open.
        asking: bool,
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn no_history_breaks_the_protocol(
            max_attempts in 1u32..6,
            base_ms in 1u64..5_000,
            cap_ms in 1u64..60_000,
            jitters in prop::collection::vec(0.0f64..1.0, 40),
            events in prop::collection::vec(event(), 1..40),
        ) {
            let policy = ExecutionPolicy {
                backoff_base: Duration::from_millis(base_ms),
                backoff_max: Duration::from_millis(cap_ms),
                ..ExecutionPolicy::default()
            };
            let mut task = Model { status: TaskStatus::Working, attempts: 0, max_attempts, running: false, asking: false };
            for (event, jitter) in events.into_iter().zip(jitters) {
                let before = task.clone();
                match event {
                    Event::Claim if !task.running && !task.status.is_terminal() => {
                        task.attempts += 1;
                        task.running = true;
                    }
                    Event::Claim => {}
                    Event::End(end) if task.running || task.status.is_terminal() => {
                        let state = AttemptState {
                            retry: Default::default(),
                            status: task.status,
                            attempt: task.attempts,
                            max_attempts: task.max_attempts,
                            owner: "w".into(),
                            open_questions: usize::from(task.asking),
                        };
                        match after_attempt(&state, &end, &policy, jitter) {
                            NextStep::Redispatch { attempts, delay, .. } => {
                                prop_assert!(delay <= policy.backoff_max, "the backoff never exceeds its cap");
                                prop_assert!(attempts <= task.attempts, "a decision never adds an attempt");
                                task.attempts = attempts;
                                task.running = false;
                            }
                            NextStep::Fail { .. } => {
                                prop_assert_eq!(task.attempts, task.max_attempts, "only the last attempt fails the task");
                                task.status = TaskStatus::Failed;
                                task.running = false;
                            }
                            NextStep::Park { attempts } => {
                                prop_assert!(task.asking, "only a task with an open question parks");
                                prop_assert!(attempts < task.attempts, "parking gives the attempt back");
                                task.attempts = attempts;
                                task.running = false;
                            }
                            NextStep::Unchanged => {
                                prop_assert!(task.status.is_terminal(), "only a terminal task is left unchanged");
                            }
                        }
                    }
                    Event::End(_) => {}
                    Event::Finish(status) if !task.status.is_terminal() => {
                        task.status = status;
                        task.running = false;
                    }
                    Event::Finish(_) => {}
                    Event::Ask if task.running && !task.status.is_terminal() => task.asking = true,
                    Event::Ask => {}
                    Event::Answer => task.asking = false,
                }
                if before.status.is_terminal() {
                    prop_assert_eq!(task.status, before.status, "a terminal task never changes");
                    prop_assert_eq!(task.attempts, before.attempts, "a terminal task never changes");
                }
                prop_assert!(task.attempts <= task.max_attempts, "attempts never exceed the maximum");
            }
        }
    }
}
