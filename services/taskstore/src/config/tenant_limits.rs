//! Limits per tenant (`--tenant-limits FILE`): a JSON file naming the
//! tenants whose limits differ from the defaults the flags set. A field a
//! tenant leaves out keeps the default.
//!
//! ```json
//! {"tenants": {"acme": {"max_tasks": 100000, "creates_per_second": 200,
//!                       "create_burst": 400, "max_waiting_calls": 1000,
//!                       "max_priority": 5, "dispatch_weight": 3,
//!                       "concurrency": {"fetch_quote": 10}}}}
//! ```
//!
//! `concurrency` sets, per tool, the most of the tenant's tasks of it that
//! run at once per key: the key its workers declare (with the tenant's own
//! number), or, for a tool that declares no limit, the tenant.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::domain::{Admission, AdmissionPolicy, ConcurrencyLimit, Rate, TenantId, ToolName};
use crate::store::Quotas;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    tenants: BTreeMap<String, TenantEntry>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantEntry {
    max_tasks: Option<u64>,
    max_tasks_per_session: Option<u64>,
    creates_per_second: Option<f64>,
    create_burst: Option<u32>,
    max_waiting_calls: Option<u32>,
    /// The highest dispatch priority the tenant may ask for (0 to 9).
    max_priority: Option<u8>,
    /// Its turns per round when tenants share a busy tool (1 to 100).
    dispatch_weight: Option<u32>,
    /// Per tool, the most of its tasks at once per key (1 to 10,000).
    #[serde(default)]
    concurrency: BTreeMap<String, u32>,
}

/// Every tenant's limits, as the file and the flags set them.
#[derive(Debug, Clone, Default)]
pub struct TenantLimits {
    pub quotas: BTreeMap<TenantId, Quotas>,
    pub admission: AdmissionPolicy,
    /// Per tenant and tool, the concurrency limit's `max`.
    pub concurrency: BTreeMap<TenantId, BTreeMap<ToolName, u32>>,
}

/// The defaults the flags set, before any tenant's own.
#[derive(Debug, Clone, Copy)]
pub struct Defaults {
    pub quotas: Quotas,
    pub creates_per_second: Option<f64>,
    pub create_burst: Option<u32>,
    pub max_waiting_calls: Option<u32>,
}

/// A rate from a per-second figure and an optional burst (default: one
/// second's worth, at least one).
pub fn rate(per_second: Option<f64>, burst: Option<u32>) -> Result<Option<Rate>, String> {
    let Some(per_second) = per_second else {
        return Ok(None);
    };
    let burst = burst.unwrap_or_else(|| per_second.ceil().clamp(1.0, f64::from(u32::MAX)) as u32);
    Rate::new(per_second, burst).map(Some).ok_or_else(|| {
        "creates per second must be a positive number, and the burst at least 1".to_owned()
    })
}

/// The quotas and admission limits of every tenant.
pub fn resolve(defaults: Defaults, file: Option<&str>) -> Result<TenantLimits, String> {
    let default = Admission {
        creates: rate(defaults.creates_per_second, defaults.create_burst)?,
        max_waiting_calls: defaults.max_waiting_calls,
    };
    let mut quotas = BTreeMap::new();
    let mut admission = AdmissionPolicy {
        default,
        tenants: BTreeMap::new(),
    };
    let mut concurrency = BTreeMap::new();
    let Some(text) = file else {
        return Ok(TenantLimits {
            quotas,
            admission,
            concurrency,
        });
    };
    let parsed: LimitsFile =
        serde_json::from_str(text).map_err(|err| format!("--tenant-limits: {err}"))?;
    for (name, entry) in parsed.tenants {
        let tenant = TenantId::parse(&name)
            .map_err(|err| format!("--tenant-limits: tenant {name:?} {err}"))?;
        if let Some(max) = entry.max_priority
            && max > crate::domain::Priority::MAX
        {
            return Err(format!(
                "--tenant-limits: tenant {name}: max_priority must be between 0 and {}",
                crate::domain::Priority::MAX
            ));
        }
        if let Some(weight) = entry.dispatch_weight
            && !(1..=crate::domain::MAX_DISPATCH_WEIGHT).contains(&weight)
        {
            return Err(format!(
                "--tenant-limits: tenant {name}: dispatch_weight must be between 1 and {}",
                crate::domain::MAX_DISPATCH_WEIGHT
            ));
        }
        let mut tools = BTreeMap::new();
        for (tool, max) in &entry.concurrency {
            let name = ToolName::parse(tool)
                .map_err(|err| format!("--tenant-limits: tenant {name}: tool {tool:?} {err}"))?;
            if !(1..=ConcurrencyLimit::MAX).contains(max) {
                return Err(format!(
                    "--tenant-limits: tenant {name}: concurrency of {tool} must be between 1 and {}",
                    ConcurrencyLimit::MAX
                ));
            }
            tools.insert(name, *max);
        }
        if !tools.is_empty() {
            concurrency.insert(tenant.clone(), tools);
        }
        quotas.insert(
            tenant.clone(),
            Quotas {
                dispatch_weight: entry.dispatch_weight.or(defaults.quotas.dispatch_weight),
                max_priority: entry.max_priority.or(defaults.quotas.max_priority),
                max_tasks: entry.max_tasks.or(defaults.quotas.max_tasks),
                max_tasks_per_session: entry
                    .max_tasks_per_session
                    .or(defaults.quotas.max_tasks_per_session),
            },
        );
        let creates = match (entry.creates_per_second, entry.create_burst) {
            (None, None) => default.creates,
            (per_second, burst) => rate(
                per_second.or(defaults.creates_per_second),
                burst.or(defaults.create_burst),
            )
            .map_err(|err| format!("--tenant-limits: tenant {name}: {err}"))?,
        };
        admission.tenants.insert(
            tenant,
            Admission {
                creates,
                max_waiting_calls: entry.max_waiting_calls.or(default.max_waiting_calls),
            },
        );
    }
    Ok(TenantLimits {
        quotas,
        admission,
        concurrency,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults {
            quotas: Quotas {
                dispatch_weight: None,
                max_priority: None,
                max_tasks: Some(1000),
                max_tasks_per_session: None,
            },
            creates_per_second: Some(10.0),
            create_burst: None,
            max_waiting_calls: Some(100),
        }
    }

    #[test]
    fn a_tenant_overrides_what_it_names_and_keeps_the_rest() {
        let file = r#"{"tenants": {"acme": {"max_tasks": 5, "creates_per_second": 2.5,
                                           "max_priority": 4, "dispatch_weight": 3,
                                           "concurrency": {"fetch": 7}}}}"#;
        let TenantLimits {
            quotas,
            admission,
            concurrency,
        } = resolve(defaults(), Some(file)).expect("valid");
        let acme = TenantId::parse("acme").expect("tenant");
        let fetch = ToolName::parse("fetch").expect("tool");
        assert_eq!(concurrency[&acme][&fetch], 7);
        assert_eq!(quotas[&acme].max_tasks, Some(5));
        assert_eq!(quotas[&acme].max_priority, Some(4));
        assert_eq!(quotas[&acme].dispatch_weight, Some(3));
        assert_eq!(admission.for_tenant(&acme).creates, Rate::new(2.5, 3));
        assert_eq!(admission.for_tenant(&acme).max_waiting_calls, Some(100));
        let other = TenantId::default_tenant();
        assert_eq!(admission.for_tenant(&other).creates, Rate::new(10.0, 10));
    }

    #[test]
    fn mistakes_in_the_file_are_named() {
        for (file, says) in [
            (r#"{"tenants": {"acme": {"max_taks": 5}}}"#, "unknown field"),
            (r#"{"tenants": {"*": {}}}"#, "tenant \"*\""),
            (
                r#"{"tenants": {"acme": {"creates_per_second": -1}}}"#,
                "positive",
            ),
            ("not json", "--tenant-limits"),
            (
                r#"{"tenants": {"acme": {"max_priority": 10}}}"#,
                "max_priority",
            ),
            (
                r#"{"tenants": {"acme": {"dispatch_weight": 0}}}"#,
                "dispatch_weight",
            ),
            (
                r#"{"tenants": {"acme": {"dispatch_weight": 101}}}"#,
                "dispatch_weight",
            ),
            (
                r#"{"tenants": {"acme": {"concurrency": {"fetch": 0}}}}"#,
                "concurrency of fetch",
            ),
            (
                r#"{"tenants": {"acme": {"concurrency": {"bad tool": 2}}}}"#,
                "tool \"bad tool\"",
            ),
        ] {
            let err = resolve(defaults(), Some(file)).expect_err(file);
            assert!(err.contains(says), "{err}");
        }
    }
}
