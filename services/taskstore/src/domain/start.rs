//! Start times: a dispatched task may be created to start at a time, or
//! after a delay. Until then it is `working` with a message saying when it
//! starts, and its job waits in the outbox (due at that time), so that it
//! survives restarts and costs nothing while it waits.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};

use super::ttl::Ttl;

/// The furthest ahead a task may be asked to start.
pub const MAX_START_DELAY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How far in the past a start time may lie and still mean "now": a
/// client's clock, or the time its request spent on the way.
pub const START_SKEW: Duration = Duration::from_secs(60);

/// When a dispatched task is asked to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartTime {
    At(DateTime<Utc>),
    After(Duration),
}

/// Why a start time was refused; the caller adds the field name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidStart {
    #[error("lies more than {} s in the past", START_SKEW.as_secs())]
    Past,
    #[error("lies more than {} days ahead", MAX_START_DELAY.as_secs() / 86_400)]
    TooFar,
    #[error("lies after the task expires (its ttl ends first)")]
    AfterExpiry,
}

impl StartTime {
    /// The time the task starts, for a create at `now` whose task lives
    /// for `ttl` (`None`: forever). A start time a little in the past
    /// ([`START_SKEW`]) starts now.
    pub fn resolve(
        self,
        now: DateTime<Utc>,
        ttl: Option<Ttl>,
    ) -> Result<DateTime<Utc>, InvalidStart> {
        let latest = now + delta(MAX_START_DELAY);
        let at = match self {
            StartTime::At(at) if at < now - delta(START_SKEW) => return Err(InvalidStart::Past),
            StartTime::At(at) => at.max(now),
            StartTime::After(delay) if delay > MAX_START_DELAY => {
                return Err(InvalidStart::TooFar);
            }
            StartTime::After(delay) => now + delta(delay),
        };
        if at > latest {
            return Err(InvalidStart::TooFar);
        }
        if let Some(ttl) = ttl
            && at >= now + delta(ttl.as_duration())
        {
            return Err(InvalidStart::AfterExpiry);
        }
        Ok(at)
    }
}

/// The status message of a task waiting for its start time.
pub fn starts_at_message(at: DateTime<Utc>) -> String {
    format!(
        "starts at {}",
        at.to_rfc3339_opts(SecondsFormat::Millis, true)
    )
}

fn delta(d: Duration) -> chrono::TimeDelta {
    chrono::TimeDelta::from_std(d).unwrap_or(chrono::TimeDelta::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_times_resolve_within_their_bounds() {
        let now = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        let secs = |s: i64| now + chrono::TimeDelta::seconds(s);
        let hour = Ttl::from_duration(Duration::from_secs(3600)).ok();
        let day = Duration::from_secs(86_400);
        type Case = (StartTime, Option<Ttl>, Result<DateTime<Utc>, InvalidStart>);
        let table: [Case; 10] = [
            (StartTime::At(secs(30)), hour, Ok(secs(30))),
            (StartTime::At(secs(-30)), hour, Ok(now)),
            (StartTime::At(secs(-61)), hour, Err(InvalidStart::Past)),
            (
                StartTime::At(secs(3600)),
                hour,
                Err(InvalidStart::AfterExpiry),
            ),
            (StartTime::At(secs(3599)), hour, Ok(secs(3599))),
            (StartTime::After(Duration::from_secs(5)), None, Ok(secs(5))),
            (
                StartTime::After(day * 365),
                None,
                Ok(now + delta(day * 365)),
            ),
            (StartTime::After(day * 366), None, Err(InvalidStart::TooFar)),
            (
                StartTime::At(now + delta(day * 366)),
                None,
                Err(InvalidStart::TooFar),
            ),
            (
                StartTime::After(Duration::MAX),
                None,
                Err(InvalidStart::TooFar),
            ),
        ];
        for (start, ttl, expected) in table {
            assert_eq!(start.resolve(now, ttl), expected, "{start:?} {ttl:?}");
        }
    }

    #[test]
    fn the_message_names_the_start_in_utc() {
        let at = DateTime::from_timestamp(1_800_000_000, 250_000_000).expect("time");
        assert_eq!(starts_at_message(at), "starts at 2027-01-15T08:00:00.250Z");
    }
}
