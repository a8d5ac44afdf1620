//! The poll interval a task advises its clients.

use std::time::Duration;

/// The longest poll interval granted: beyond it a client would learn of a
/// finished task too late to be useful.
pub const MAX_POLL_INTERVAL: Duration = Duration::from_secs(3600);

/// How a task's poll interval is chosen: the requested one, no shorter than
/// `min` (a floor that protects the service from eager pollers) and no longer
/// than [`MAX_POLL_INTERVAL`]; the default when none is requested.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollPolicy {
    pub default: Duration,
    pub min: Duration,
}

impl Default for PollPolicy {
    fn default() -> Self {
        Self {
            default: Duration::from_secs(1),
            min: Duration::from_millis(100),
        }
    }
}

impl PollPolicy {
    pub fn granted(&self, requested: Option<Duration>) -> Duration {
        requested.map_or(self.default, |wanted| {
            wanted.clamp(self.min, MAX_POLL_INTERVAL.max(self.min))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_granted_within_bounds() {
        let policy = PollPolicy {
            default: Duration::from_secs(2),
            min: Duration::from_millis(500),
        };
        assert_eq!(policy.granted(None), Duration::from_secs(2));
        assert_eq!(
            policy.granted(Some(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert_eq!(
            policy.granted(Some(Duration::from_millis(10))),
            Duration::from_millis(500)
        );
        assert_eq!(
            policy.granted(Some(Duration::from_secs(86_400))),
            MAX_POLL_INTERVAL
        );
    }

    #[test]
    fn a_floor_above_the_cap_wins() {
        let policy = PollPolicy {
            default: Duration::from_secs(7200),
            min: Duration::from_secs(7200),
        };
        assert_eq!(
            policy.granted(Some(Duration::from_secs(1))),
            Duration::from_secs(7200)
        );
    }
}
