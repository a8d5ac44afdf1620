//! Task retention.

use std::time::Duration;

/// How long a task is kept, in whole milliseconds (MCP's unit), at least 1 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ttl(u64);

/// Why a ttl was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidTtl(pub &'static str);

impl Ttl {
    /// A sanity bound far beyond any configured maximum (about 100 years), so
    /// that expiry arithmetic can never overflow a timestamp.
    pub const MAX_MILLIS: u64 = 100 * 366 * 24 * 60 * 60 * 1000;

    pub fn from_millis(millis: u64) -> Result<Self, InvalidTtl> {
        match millis {
            0 => Err(InvalidTtl("must be at least 1 ms")),
            m if m > Self::MAX_MILLIS => Err(InvalidTtl("must be at most 100 years")),
            m => Ok(Self(m)),
        }
    }

    /// Converts a duration, dropping sub-millisecond precision.
    pub fn from_duration(duration: Duration) -> Result<Self, InvalidTtl> {
        let millis = u64::try_from(duration.as_millis())
            .map_err(|_| InvalidTtl("must be at most 100 years"))?;
        Self::from_millis(millis)
    }

    pub fn as_millis(self) -> u64 {
        self.0
    }

    /// The same value as a signed integer, for storage. Cannot fail: the
    /// value is bounded by [`Ttl::MAX_MILLIS`].
    pub fn as_millis_i64(self) -> i64 {
        i64::try_from(self.0).unwrap_or(i64::MAX)
    }

    pub fn as_duration(self) -> Duration {
        Duration::from_millis(self.0)
    }
}

/// The retention a new task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TtlRequest {
    /// Nothing asked: the server's default.
    #[default]
    ServerDefault,
    /// Keep it until it is deleted (MCP's `ttl: null`).
    Unlimited,
    Of(Ttl),
}

impl From<Option<Ttl>> for TtlRequest {
    fn from(ttl: Option<Ttl>) -> Self {
        ttl.map_or(Self::ServerDefault, Self::Of)
    }
}

/// How the actual ttl of a new task is chosen: the requested one, else the
/// default, capped at `max`. `None` means unlimited everywhere, so with a
/// maximum but no default a task that asks for nothing gets the maximum,
/// and one that asks for no expiry gets it only where there is no maximum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TtlPolicy {
    pub default: Option<Ttl>,
    pub max: Option<Ttl>,
}

impl TtlPolicy {
    pub fn effective(&self, requested: impl Into<TtlRequest>) -> Option<Ttl> {
        let wanted = match requested.into() {
            TtlRequest::ServerDefault => self.default,
            TtlRequest::Unlimited => None,
            TtlRequest::Of(ttl) => Some(ttl),
        };
        match (wanted, self.max) {
            (Some(ttl), Some(max)) => Some(ttl.min(max)),
            (None, Some(max)) => Some(max),
            (ttl, None) => ttl,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ttl(ms: u64) -> Ttl {
        Ttl::from_millis(ms).expect("valid ttl")
    }

    #[test]
    fn bounds() {
        assert!(Ttl::from_millis(0).is_err());
        assert!(Ttl::from_millis(Ttl::MAX_MILLIS + 1).is_err());
        assert_eq!(Ttl::from_duration(Duration::from_micros(1500)), Ok(ttl(1)));
        assert!(Ttl::from_duration(Duration::from_micros(999)).is_err());
    }

    #[test]
    fn effective_ttl() {
        let none = TtlPolicy::default();
        assert_eq!(none.effective(None), None);
        assert_eq!(none.effective(Some(ttl(5))), Some(ttl(5)));

        let capped = TtlPolicy {
            default: Some(ttl(10)),
            max: Some(ttl(100)),
        };
        assert_eq!(capped.effective(None), Some(ttl(10)));
        assert_eq!(capped.effective(Some(ttl(50))), Some(ttl(50)));
        assert_eq!(capped.effective(Some(ttl(500))), Some(ttl(100)));

        let max_only = TtlPolicy {
            default: None,
            max: Some(ttl(100)),
        };
        assert_eq!(max_only.effective(None), Some(ttl(100)));
    }

    #[test]
    fn no_expiry_is_granted_only_without_a_maximum() {
        let open = TtlPolicy {
            default: Some(ttl(10)),
            max: None,
        };
        assert_eq!(open.effective(TtlRequest::Unlimited), None);
        assert_eq!(open.effective(TtlRequest::ServerDefault), Some(ttl(10)));
        let capped = TtlPolicy {
            default: Some(ttl(10)),
            max: Some(ttl(100)),
        };
        assert_eq!(capped.effective(TtlRequest::Unlimited), Some(ttl(100)));
    }
}
