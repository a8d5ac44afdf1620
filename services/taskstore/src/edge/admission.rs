//! Admission per tenant, on this replica: the create rate (a token bucket
//! per tenant; refused with a delay saying when to come back) and the calls
//! kept waiting (WatchTask streams, waiting GetTaskResult calls, `/mcp`
//! streams and waiting calls, the dashboard's live views; a slot held for
//! as long as the call). Exact under
//! concurrency within a replica; across N replicas a tenant gets up to N
//! times the figures (docs/security.md says so, and how to set them).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::domain::{AdmissionPolicy, TenantId, TokenBucket};

/// A refusal, said the same to every kind of caller: gRPC turns it into
/// RESOURCE_EXHAUSTED with a RetryInfo detail, the MCP endpoint into its
/// own error code with `retryAfterMs`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct AdmissionRefused {
    pub message: String,
    /// When trying again may succeed (a rate refusal says; a waiting-call
    /// refusal cannot know).
    pub retry_after: Option<Duration>,
}

#[derive(Debug, Default)]
pub struct Admissions {
    policy: AdmissionPolicy,
    buckets: Mutex<HashMap<TenantId, TokenBucket>>,
    waiting: Arc<Mutex<HashMap<TenantId, u32>>>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The maps stay consistent even if a holder panicked.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Admissions {
    pub fn new(policy: AdmissionPolicy) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    /// Whether `tenant` may create a task now.
    pub fn admit_create(&self, tenant: &TenantId) -> Result<(), AdmissionRefused> {
        let Some(rate) = self.policy.for_tenant(tenant).creates else {
            return Ok(());
        };
        let now = Instant::now();
        let mut buckets = locked(&self.buckets);
        let bucket = buckets
            .entry(tenant.clone())
            .or_insert_with(|| TokenBucket::full(rate, now));
        bucket.take(rate, now).map_err(|wait| {
            crate::metrics::admission_refused("create_rate");
            AdmissionRefused {
                message: format!(
                    "too many creates: at most {} per second (burst {}); retry in {} ms",
                    rate.per_second,
                    rate.burst,
                    wait.as_millis().max(1)
                ),
                retry_after: Some(wait),
            }
        })
    }

    /// A slot for a call that waits (a stream, a waiting result), held
    /// until the returned guard is dropped.
    pub fn hold_waiting(&self, tenant: &TenantId) -> Result<WaitingSlot, AdmissionRefused> {
        let limit = self.policy.for_tenant(tenant).max_waiting_calls;
        let mut waiting = locked(&self.waiting);
        let count = waiting.entry(tenant.clone()).or_insert(0);
        if limit.is_some_and(|max| *count >= max) {
            crate::metrics::admission_refused("waiting_calls");
            return Err(AdmissionRefused {
                message: format!(
                    "too many waiting calls: at most {} open streams and waiting calls (WatchTask, waiting GetTaskResult, /mcp streams); close one, or poll",
                    limit.unwrap_or_default()
                ),
                retry_after: None,
            });
        }
        *count += 1;
        Ok(WaitingSlot {
            waiting: self.waiting.clone(),
            tenant: tenant.clone(),
        })
    }
}

/// One waiting call's slot; given back when dropped.
#[derive(Debug)]
pub struct WaitingSlot {
    waiting: Arc<Mutex<HashMap<TenantId, u32>>>,
    tenant: TenantId,
}

impl Drop for WaitingSlot {
    fn drop(&mut self) {
        let mut waiting = locked(&self.waiting);
        if let Some(count) = waiting.get_mut(&self.tenant) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                waiting.remove(&self.tenant);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Admission, Rate};

    fn acme() -> TenantId {
        TenantId::parse("acme").expect("tenant")
    }

    #[test]
    fn creates_beyond_the_burst_are_refused_with_a_retry_delay() {
        let admissions = Admissions::new(AdmissionPolicy {
            default: Admission {
                creates: Rate::new(1.0, 2),
                max_waiting_calls: None,
            },
            ..AdmissionPolicy::default()
        });
        assert!(admissions.admit_create(&acme()).is_ok());
        assert!(admissions.admit_create(&acme()).is_ok());
        let refused = admissions
            .admit_create(&acme())
            .expect_err("over the burst");
        assert!(refused.retry_after.is_some_and(|d| d.as_millis() > 0));
        // Another tenant has its own bucket.
        assert!(admissions.admit_create(&TenantId::default_tenant()).is_ok());
    }

    #[test]
    fn waiting_slots_are_counted_until_given_back() {
        let admissions = Admissions::new(AdmissionPolicy {
            default: Admission {
                creates: None,
                max_waiting_calls: Some(2),
            },
            ..AdmissionPolicy::default()
        });
        let first = admissions.hold_waiting(&acme()).expect("first");
        let _second = admissions.hold_waiting(&acme()).expect("second");
        assert!(admissions.hold_waiting(&acme()).is_err());
        drop(first);
        assert!(admissions.hold_waiting(&acme()).is_ok());
    }
}
