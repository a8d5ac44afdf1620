//! Limits per tenant: how fast it may create tasks and how many calls it
//! may keep waiting (WatchTask streams, waiting GetTaskResult calls). The
//! decisions are pure: a token bucket that says when the next create may
//! come, and a policy that gives each tenant its limits (its own where set,
//! else the defaults). Task quotas (how many live tasks) are the stores'
//! (`StoreConfig::quotas_for`), since only the store can count exactly.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::ids::TenantId;

/// A rate: `per_second` on average, up to `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub per_second: f64,
    pub burst: u32,
}

impl Rate {
    /// `None` when the rate cannot work (not positive, or a burst of 0).
    pub fn new(per_second: f64, burst: u32) -> Option<Self> {
        (per_second.is_finite() && per_second > 0.0 && burst > 0)
            .then_some(Self { per_second, burst })
    }
}

/// The admission limits of one tenant; `None` is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Admission {
    pub creates: Option<Rate>,
    pub max_waiting_calls: Option<u32>,
}

/// Each tenant's admission limits: its own where set, else the defaults.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AdmissionPolicy {
    pub default: Admission,
    pub tenants: BTreeMap<TenantId, Admission>,
}

impl AdmissionPolicy {
    pub fn for_tenant(&self, tenant: &TenantId) -> Admission {
        self.tenants.get(tenant).copied().unwrap_or(self.default)
    }

    /// Whether any tenant has any limit (else admission costs nothing).
    pub fn limits_anything(&self) -> bool {
        std::iter::once(&self.default)
            .chain(self.tenants.values())
            .any(|a| a.creates.is_some() || a.max_waiting_calls.is_some())
    }
}

/// A token bucket: full (`burst` tokens) at first, refilled at the rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    updated: Instant,
}

impl TokenBucket {
    pub fn full(rate: Rate, now: Instant) -> Self {
        Self {
            tokens: f64::from(rate.burst),
            updated: now,
        }
    }

    /// Takes a token at `now`, or says how long until one is there.
    pub fn take(&mut self, rate: Rate, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.updated).as_secs_f64();
        self.tokens = (self.tokens + elapsed * rate.per_second).min(f64::from(rate.burst));
        self.updated = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - self.tokens) / rate.per_second,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_bucket_allows_its_burst_then_its_rate() {
        let rate = Rate::new(2.0, 3).expect("rate");
        let start = Instant::now();
        let mut bucket = TokenBucket::full(rate, start);
        for _ in 0..3 {
            assert_eq!(bucket.take(rate, start), Ok(()));
        }
        let wait = bucket.take(rate, start).expect_err("empty");
        assert_eq!(wait, Duration::from_millis(500));
        assert_eq!(
            bucket.take(rate, start + Duration::from_millis(500)),
            Ok(())
        );
        // Idle time refills up to the burst, not beyond.
        let later = start + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(bucket.take(rate, later), Ok(()));
        }
        assert!(bucket.take(rate, later).is_err());
    }

    #[test]
    fn a_tenant_has_its_own_limits_or_the_defaults() {
        let acme = TenantId::parse("acme").expect("tenant");
        let policy = AdmissionPolicy {
            default: Admission {
                creates: Rate::new(10.0, 10),
                max_waiting_calls: Some(5),
            },
            tenants: [(
                acme.clone(),
                Admission {
                    creates: None,
                    max_waiting_calls: Some(50),
                },
            )]
            .into(),
        };
        assert_eq!(policy.for_tenant(&acme).max_waiting_calls, Some(50));
        assert_eq!(policy.for_tenant(&acme).creates, None);
        assert_eq!(
            policy
                .for_tenant(&TenantId::default_tenant())
                .max_waiting_calls,
            Some(5)
        );
        assert!(policy.limits_anything());
        assert!(!AdmissionPolicy::default().limits_anything());
        assert_eq!(Rate::new(0.0, 1), None);
        assert_eq!(Rate::new(f64::NAN, 1), None);
        assert_eq!(Rate::new(1.0, 0), None);
    }

    proptest! {
        /// Over any window, no more creates pass than the burst plus the
        /// rate times the window.
        #[test]
        fn never_more_than_the_burst_plus_the_rate(
            per_second in 0.5f64..200.0,
            burst in 1u32..50,
            gaps in proptest::collection::vec(0u64..300, 1..300),
        ) {
            let rate = Rate::new(per_second, burst).expect("rate");
            let start = Instant::now();
            let mut bucket = TokenBucket::full(rate, start);
            let mut now = start;
            let mut passed = 0u32;
            for gap in gaps {
                now += Duration::from_millis(gap);
                if bucket.take(rate, now).is_ok() {
                    passed += 1;
                }
            }
            let allowed = f64::from(burst) + now.duration_since(start).as_secs_f64() * per_second;
            prop_assert!(f64::from(passed) <= allowed + 1e-6, "{passed} > {allowed}");
        }
    }
}
