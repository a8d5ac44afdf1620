//! Start times: a dispatched task may be created to start at a time, or
//! after a delay. Until then it is `working` with a message saying when it
//! starts, and its job waits in the outbox (due at that time), so that it
//! survives restarts and costs nothing while it waits.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value};

use super::ttl::Ttl;

/// The furthest ahead a task may be asked to start.
pub const MAX_START_DELAY: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// How far in the past a start time may lie and still mean "now": a
/// client's clock, or the time its request spent on the way.
pub const START_SKEW: Duration = Duration::from_secs(60);

/// The `_meta` entry of an MCP `tools/call` that names its start time (an
/// RFC 3339 string).
pub const START_AT_META_KEY: &str = "mcp-taskstore/start-at";
/// The `_meta` entry that names its delay instead (milliseconds).
pub const START_AFTER_META_KEY: &str = "mcp-taskstore/start-after-ms";

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
    /// The start an MCP request names in its `params._meta`
    /// ([`super::JsonObject::params_meta`]), if any. A value that does not read as
    /// one is refused, not ignored.
    pub fn of_meta(meta: Option<&Map<String, Value>>) -> Result<Option<Self>, String> {
        let entry = |key| meta.and_then(|meta| meta.get(key));
        match (entry(START_AT_META_KEY), entry(START_AFTER_META_KEY)) {
            (Some(_), Some(_)) => Err(format!(
                "_meta names both \"{START_AT_META_KEY}\" and \"{START_AFTER_META_KEY}\""
            )),
            (Some(at), None) => at
                .as_str()
                .and_then(|at| DateTime::parse_from_rfc3339(at).ok())
                .map(|at| Some(StartTime::At(at.with_timezone(&Utc))))
                .ok_or_else(|| format!("_meta[\"{START_AT_META_KEY}\"] must be an RFC 3339 time")),
            (None, Some(after)) => after
                .as_u64()
                .map(|ms| Some(StartTime::After(Duration::from_millis(ms))))
                .ok_or_else(|| format!("_meta[\"{START_AFTER_META_KEY}\"] must be milliseconds")),
            (None, None) => Ok(None),
        }
    }

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
    fn an_mcp_request_names_its_start_in_meta() {
        let with = |meta: &str| {
            let request =
                format!(r#"{{"method":"tools/call","params":{{"name":"echo","_meta":{meta}}}}}"#);
            StartTime::of_meta(
                crate::domain::JsonObject::parse(request)
                    .expect("object")
                    .params_meta()
                    .as_ref(),
            )
        };
        let at = DateTime::from_timestamp(1_800_000_000, 0).expect("time");
        assert_eq!(
            with(r#"{"mcp-taskstore/start-at":"2027-01-15T09:00:00+01:00"}"#),
            Ok(Some(StartTime::At(at)))
        );
        assert_eq!(
            with(r#"{"mcp-taskstore/start-after-ms":2500}"#),
            Ok(Some(StartTime::After(Duration::from_millis(2500))))
        );
        assert_eq!(with(r#"{"progressToken":1}"#), Ok(None));
        for bad in [
            r#"{"mcp-taskstore/start-at":"tomorrow"}"#,
            r#"{"mcp-taskstore/start-at":5}"#,
            r#"{"mcp-taskstore/start-after-ms":-1}"#,
            r#"{"mcp-taskstore/start-after-ms":"5s"}"#,
            r#"{"mcp-taskstore/start-at":"2027-01-15T09:00:00Z","mcp-taskstore/start-after-ms":1}"#,
        ] {
            assert!(with(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_message_names_the_start_in_utc() {
        let at = DateTime::from_timestamp(1_800_000_000, 250_000_000).expect("time");
        assert_eq!(starts_at_message(at), "starts at 2027-01-15T08:00:00.250Z");
    }
}
