//! A tool's retry policy, as its workers declare it: how many attempts its
//! tasks get, the backoff between them, and which failures are retried at
//! all. What a tool leaves out is the service's (`ExecutionPolicy`). A task
//! keeps the policy its tool declared when it was created, so a redeploy
//! with another policy does not change the rules under a running task.

use std::time::Duration;

use super::ExecutionPolicy;

/// The retry rules a tool declares; `None` and `true` are the service's
/// defaults, so an empty policy changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryPolicy {
    /// Attempts a task gets when its caller asks for no number (1: never
    /// retried). The operator's `--max-max-attempts` still caps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_attempts: Option<u32>,
    /// The first retry's backoff ceiling; doubles per attempt.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "millis")]
    pub backoff_base: Option<Duration>,
    /// The longest backoff.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "millis")]
    pub backoff_max: Option<Duration>,
    /// Whether an error the tool reports as retryable is retried (false:
    /// the task fails at once with it).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub retry_errors: bool,
    /// Whether a task whose worker was lost mid-attempt (its lease ran out:
    /// a crash, a freeze, a partition) runs again. False for a tool whose
    /// work must not be repeated after a half-done attempt: the task fails.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub retry_lost_workers: bool,
}

fn yes() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: None,
            backoff_base: None,
            backoff_max: None,
            retry_errors: true,
            retry_lost_workers: true,
        }
    }
}

/// Why a declared policy was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("retry.{field} {reason}")]
pub struct InvalidRetryPolicy {
    pub field: &'static str,
    pub reason: String,
}

impl RetryPolicy {
    /// Most attempts a tool may declare (the service's own cap applies too).
    pub const MAX_ATTEMPTS: u32 = 100;
    /// Shortest backoff a tool may declare: below it, a failing tool spins.
    pub const MIN_BACKOFF: Duration = Duration::from_millis(10);
    /// Longest backoff a tool may declare.
    pub const MAX_BACKOFF: Duration = Duration::from_secs(24 * 60 * 60);

    /// Whether it is the service's policy unchanged (nothing to store).
    pub fn is_default(&self) -> bool {
        self == &Self::default()
    }

    /// Checks a declaration's bounds.
    pub fn parse(declared: Self) -> Result<Self, InvalidRetryPolicy> {
        let refuse = |field, reason: String| Err(InvalidRetryPolicy { field, reason });
        if let Some(attempts) = declared.max_attempts
            && !(1..=Self::MAX_ATTEMPTS).contains(&attempts)
        {
            return refuse(
                "max_attempts",
                format!("must be between 1 and {}", Self::MAX_ATTEMPTS),
            );
        }
        for (field, backoff) in [
            ("backoff_base", declared.backoff_base),
            ("backoff_max", declared.backoff_max),
        ] {
            if let Some(backoff) = backoff
                && !(Self::MIN_BACKOFF..=Self::MAX_BACKOFF).contains(&backoff)
            {
                return refuse(field, "must be between 10ms and 24h".to_owned());
            }
        }
        if let (Some(base), Some(max)) = (declared.backoff_base, declared.backoff_max)
            && max < base
        {
            return refuse(
                "backoff_max",
                "must not be shorter than backoff_base".into(),
            );
        }
        Ok(declared)
    }

    /// The attempts a new task gets: what its caller asked, else what its
    /// tool declares (within the service's cap), else the service's
    /// default. `None` when the caller asked for more than the cap (or 0).
    pub fn attempts(&self, requested: Option<u32>, service: &ExecutionPolicy) -> Option<u32> {
        let attempts = match requested {
            Some(asked) => asked,
            None => self
                .max_attempts
                .map_or(service.default_max_attempts, |declared| {
                    declared.min(service.max_max_attempts)
                }),
        };
        (1..=service.max_max_attempts)
            .contains(&attempts)
            .then_some(attempts)
    }

    /// The delay before attempt `failed_attempt + 1`, given a random value
    /// in `[0, 1)`: the service's backoff with the tool's bounds.
    pub fn backoff(&self, service: &ExecutionPolicy, failed_attempt: u32, random: f64) -> Duration {
        ExecutionPolicy {
            backoff_base: self.backoff_base.unwrap_or(service.backoff_base),
            backoff_max: self.backoff_max.unwrap_or(service.backoff_max),
            ..*service
        }
        .backoff(failed_attempt, random)
    }

    /// The policy as a task row keeps it: `None` for the service's.
    pub fn to_stored(&self) -> Option<String> {
        (!self.is_default())
            .then(|| serde_json::to_string(self).ok())
            .flatten()
    }

    /// A stored policy; one this build cannot read is the service's.
    pub fn of_stored(stored: Option<&str>) -> Self {
        stored
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }
}

/// Durations as whole milliseconds in stored JSON.
mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::super::{AttemptEnd, AttemptState, NextStep, after_attempt};
    use crate::domain::TaskStatus;

    /// The service's policy the decision falls back on.
    fn decided_by() -> ExecutionPolicy {
        ExecutionPolicy {
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(8),
            ..ExecutionPolicy::default()
        }
    }

    /// Attempt 1 of 3, running on `w1`.
    fn working() -> AttemptState {
        AttemptState {
            status: TaskStatus::Working,
            attempt: 1,
            max_attempts: 3,
            owner: "w1".into(),
            open_questions: 0,
            retry: RetryPolicy::default(),
        }
    }

    fn retryable() -> AttemptEnd {
        AttemptEnd::RetryableFailure {
            error: "timeout".into(),
        }
    }

    #[test]
    fn the_tools_retry_policy_decides_which_failures_run_again_and_when() {
        let with = |retry: RetryPolicy| AttemptState { retry, ..working() };
        let no_errors = with(RetryPolicy {
            retry_errors: false,
            ..RetryPolicy::default()
        });
        assert_eq!(
            after_attempt(&no_errors, &retryable(), &decided_by(), 0.5),
            NextStep::Fail {
                message: "failed: timeout (its tool retries no errors)".into()
            }
        );
        // A lost worker is still run again: only errors were declined.
        assert!(matches!(
            after_attempt(&no_errors, &AttemptEnd::LeaseExpired, &decided_by(), 0.5),
            NextStep::Redispatch { attempts: 1, .. }
        ));
        let not_after_a_crash = with(RetryPolicy {
            retry_lost_workers: false,
            ..RetryPolicy::default()
        });
        assert_eq!(
            after_attempt(&not_after_a_crash, &AttemptEnd::LeaseExpired, &decided_by(), 0.5),
            NextStep::Fail {
                message: "failed: the worker running it (w1) stopped renewing its lease, and its tool does not run a task again after a lost worker".into()
            }
        );
        // Neither a shutdown nor a park is a failure: the attempt is given
        // back whatever the policy.
        for end in [AttemptEnd::Shutdown, AttemptEnd::Parked] {
            assert!(matches!(
                after_attempt(&not_after_a_crash, &end, &decided_by(), 0.5),
                NextStep::Redispatch { attempts: 0, .. }
            ));
        }
        let quick = with(RetryPolicy {
            backoff_base: Some(Duration::from_millis(40)),
            ..RetryPolicy::default()
        });
        assert_eq!(
            after_attempt(&quick, &retryable(), &decided_by(), 0.0),
            NextStep::Redispatch {
                attempts: 1,
                delay: Duration::from_millis(20),
                message: "attempt 1 of 3 failed: timeout; retrying in 20ms".into()
            }
        );
    }

    fn service() -> ExecutionPolicy {
        ExecutionPolicy {
            default_max_attempts: 3,
            max_max_attempts: 10,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            ..ExecutionPolicy::default()
        }
    }

    #[test]
    fn attempts_come_from_the_caller_then_the_tool_then_the_service() {
        let tool = RetryPolicy {
            max_attempts: Some(5),
            ..RetryPolicy::default()
        };
        assert_eq!(tool.attempts(Some(2), &service()), Some(2));
        assert_eq!(tool.attempts(None, &service()), Some(5));
        assert_eq!(RetryPolicy::default().attempts(None, &service()), Some(3));
        // The operator's cap wins over a tool's declaration, silently: the
        // caller did not ask for it.
        let greedy = RetryPolicy {
            max_attempts: Some(50),
            ..RetryPolicy::default()
        };
        assert_eq!(greedy.attempts(None, &service()), Some(10));
        // A caller asking past the cap, or for none, is refused.
        assert_eq!(tool.attempts(Some(11), &service()), None);
        assert_eq!(tool.attempts(Some(0), &service()), None);
    }

    #[test]
    fn the_backoff_takes_the_tools_bounds_and_the_services_otherwise() {
        let tool = RetryPolicy {
            backoff_base: Some(Duration::from_millis(100)),
            backoff_max: Some(Duration::from_millis(300)),
            ..RetryPolicy::default()
        };
        // Full jitter value: the ceiling itself.
        let top = 0.999_999;
        assert!(tool.backoff(&service(), 1, top) <= Duration::from_millis(100));
        assert!(tool.backoff(&service(), 2, top) <= Duration::from_millis(200));
        assert!(tool.backoff(&service(), 9, top) <= Duration::from_millis(300));
        assert!(tool.backoff(&service(), 9, 0.0) >= Duration::from_millis(150));
        let only_base = RetryPolicy {
            backoff_base: Some(Duration::from_millis(100)),
            ..RetryPolicy::default()
        };
        assert_eq!(
            only_base.backoff(&service(), 30, 0.0),
            Duration::from_secs(30),
            "the service's cap applies when the tool names none"
        );
        assert_eq!(
            RetryPolicy::default().backoff(&service(), 2, 0.5),
            service().backoff(2, 0.5)
        );
    }

    #[test]
    fn declarations_out_of_bounds_are_refused_with_their_field() {
        let field = |declared: RetryPolicy| RetryPolicy::parse(declared).err().map(|e| e.field);
        let ms = Duration::from_millis;
        let cases = [
            (Some(0), None, None, Some("max_attempts")),
            (Some(101), None, None, Some("max_attempts")),
            (Some(100), None, None, None),
            (None, Some(ms(9)), None, Some("backoff_base")),
            (None, None, Some(ms(86_400_001)), Some("backoff_max")),
            (None, Some(ms(500)), Some(ms(100)), Some("backoff_max")),
            (None, Some(ms(100)), Some(ms(100)), None),
        ];
        for (max_attempts, backoff_base, backoff_max, refused) in cases {
            let declared = RetryPolicy {
                max_attempts,
                backoff_base,
                backoff_max,
                ..RetryPolicy::default()
            };
            assert_eq!(field(declared.clone()), refused, "{declared:?}");
        }
    }

    #[test]
    fn a_stored_policy_reads_back_and_the_default_stores_nothing() {
        assert_eq!(RetryPolicy::default().to_stored(), None);
        let tool = RetryPolicy {
            max_attempts: Some(4),
            backoff_base: Some(Duration::from_millis(250)),
            backoff_max: None,
            retry_errors: true,
            retry_lost_workers: false,
        };
        let stored = tool.to_stored().expect("stored");
        assert_eq!(
            stored,
            r#"{"maxAttempts":4,"backoffBase":250,"retryLostWorkers":false}"#
        );
        assert_eq!(RetryPolicy::of_stored(Some(&stored)), tool);
        assert_eq!(RetryPolicy::of_stored(None), RetryPolicy::default());
        assert_eq!(
            RetryPolicy::of_stored(Some("not json")),
            RetryPolicy::default()
        );
    }
}
