//! A new task's limits per key: its tool's declared concurrency limit and
//! rate (with the operator's number for its tenant), and the task's key
//! under each, computed once, at create, from its tenant, session and
//! arguments. Every backend calls this; the decision then compares strings.

use super::StoreConfig;
use crate::domain::{ConcurrencyLimit, KeyInputs, KeyLimit, NewTask, Scope, TaskRate};

/// What limits one task's dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TaskLimits {
    pub concurrency: Option<KeyLimit>,
    pub rate: Option<TaskRate>,
    /// Its key within its tenant for taking turns (`domain::next_jobs`).
    pub fairness: Option<String>,
}

impl StoreConfig {
    /// `task`'s limits in `scope`: none for a task nobody dispatches, or
    /// whose tool declares none (and the tenant has no number of its own).
    pub(crate) fn dispatch_limits(&self, scope: &Scope, task: &NewTask) -> TaskLimits {
        let Some(dispatch) = task.dispatch.as_ref() else {
            return TaskLimits::default();
        };
        let own = self
            .tenant_concurrency
            .get(&scope.tenant)
            .and_then(|tools| tools.get(&dispatch.tool))
            .copied();
        let concurrency = match (&dispatch.concurrency, own) {
            (Some(declared), None) => Some(declared.clone()),
            (Some(declared), Some(max)) => Some(ConcurrencyLimit {
                max,
                key: declared.key.clone(),
            }),
            (None, Some(max)) => Some(ConcurrencyLimit::per_tenant(max)),
            (None, None) => None,
        };
        if concurrency.is_none() && dispatch.rate.is_none() && dispatch.fairness.is_none() {
            return TaskLimits::default();
        }
        // Only a limited tool's creates read their request again.
        let request: serde_json::Value =
            serde_json::from_str(task.request.as_str()).unwrap_or_default();
        let arguments = request
            .pointer("/params/arguments")
            .unwrap_or(&serde_json::Value::Null);
        let inputs = KeyInputs {
            tenant: scope.tenant.as_str(),
            tool: dispatch.tool.as_str(),
            session: scope.session.as_ref().map(|session| session.as_str()),
            arguments,
        };
        TaskLimits {
            concurrency: concurrency.map(|limit| limit.key_of(inputs)),
            rate: dispatch.rate.as_ref().map(|rate| rate.key_of(inputs)),
            fairness: dispatch.fairness.as_ref().map(|key| key.value_of(inputs)),
        }
    }
}
