//! The service boundary: the [`TaskStore`] trait every backend implements,
//! and the policy (ttl, quotas, paging) every backend applies the same way.

pub mod changes;
pub mod dispatch_gate;
pub mod execution;
pub mod insights;
pub mod keys;
pub mod memory;
pub mod operations;
pub mod postgres;
pub mod sqlite;
pub mod statements;
mod task_limits;

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{
    Answered, Answers, DispatchRequest, ExecutionPolicy, HoldOutcome, Holder, LeaseToken,
    NewResult, NewTask, PageRequest, PollPolicy, Question, Scope, StatusUpdate, Task, TaskId,
    TaskPage, TaskResult, TaskStatus, TenantId, TtlPolicy,
};
use crate::error::StoreError;

/// The MCP task-store contract. Every backend (and the gRPC client) honours
/// the same behaviour, proved by the conformance suite in `tests/`:
///
/// - an expired task is [`StoreError::NotFound`] for every operation and
///   absent from listings at once, deleted or not;
/// - a task of another session than `scope.session` (when one is named) is
///   [`StoreError::NotFound`] too;
/// - terminal statuses are final and at most one result is ever stored, even
///   under concurrent callers.
#[async_trait]
pub trait TaskStore: QuestionStore + Send + Sync + 'static {
    /// Creates a task in `working` in `scope` (its session, if any).
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError>;

    async fn get_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError>;

    /// Moves a non-terminal task to `update.status` and replaces its message.
    async fn update_status(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        update: StatusUpdate,
    ) -> Result<Task, StoreError>;

    /// Stores the result and the terminal status of a non-terminal task.
    async fn store_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        result: NewResult,
    ) -> Result<Task, StoreError>;

    /// The stored result of a completed or failed task.
    async fn get_result(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskResult, StoreError>;

    /// A page of the tasks visible in `scope`, oldest first.
    async fn list_tasks(&self, scope: &Scope, page: PageRequest) -> Result<TaskPage, StoreError>;

    /// Cancels a non-terminal task; a terminal one comes back unchanged.
    async fn cancel_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError>;

    /// Deletes a task with its result at once, whatever its status. A
    /// running attempt is not stopped: its worker's next report finds no
    /// task. NOT_FOUND as for every other operation.
    async fn delete_task(&self, scope: &Scope, task_id: &TaskId) -> Result<(), StoreError>;

    /// Deletes expired tasks of every tenant; returns how many.
    async fn cleanup_expired(&self) -> Result<u64, StoreError>;

    /// The task now, then after every change, until it is terminal (the
    /// stream ends) or disappears (a NOT_FOUND item ends it). Changes made
    /// on any replica are seen.
    async fn watch_task(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskWatch, StoreError>;

    /// Every change to the tasks of `scope` (its tenant's; its session's
    /// when it names one) from now on, made on any replica, in order: each
    /// item is the task after the change, or a resync when changes may have
    /// been missed. Creations and deletions are not changes. For streams
    /// that follow many tasks (MCP notifications, the dashboard).
    async fn follow_tasks(&self, scope: &Scope) -> Result<TaskFollow, StoreError>;

    /// MCP `tasks/result`: waits up to `timeout` for the task to be
    /// terminal, without polling, then answers as [`TaskStore::get_result`].
    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError>;

    /// Holds a task its caller runs in its own process (gRPC HoldTask):
    /// a first hold (`renewing` None) gives it a lease of one attempt; a
    /// renewal extends it, or says stop. A lapsed lease fails the task
    /// through the lease reaper (`domain::execution::hold`).
    async fn hold_task(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &Holder,
        renewing: Option<&LeaseToken>,
    ) -> Result<HoldOutcome, StoreError>;
}

/// The questions a task's tool asks its caller, as the caller sees them:
/// part of every [`TaskStore`] (the worker's side, asking, is
/// [`ExecutionStore::ask`]).
#[async_trait]
pub trait QuestionStore: Send + Sync + 'static {
    /// The questions (MCP input requests) the task's tool asked, open and
    /// answered, in the order asked.
    async fn questions(&self, scope: &Scope, task_id: &TaskId)
    -> Result<Vec<Question>, StoreError>;

    /// Answers open questions (MCP `tasks/update`): answers to open keys
    /// are stored, others ignored. The task stays `input_required` while a
    /// question is open and is `working` once all are answered; a parked
    /// task is then dispatched again. A terminal task refuses
    /// (FAILED_PRECONDITION).
    async fn answer_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError>;
}

pub use changes::{ChangedTask, Followed, TaskFollow};
pub use insights::{InsightsSource, TaskInsights};

/// The stream [`TaskStore::watch_task`] returns.
pub type TaskWatch =
    std::pin::Pin<Box<dyn tokio_stream::Stream<Item = Result<Task, StoreError>> + Send>>;

/// Limits on how many unexpired tasks may exist; `None` is unlimited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Quotas {
    pub max_tasks: Option<u64>,
    pub max_tasks_per_session: Option<u64>,
    /// The highest dispatch priority the tenant may ask for (`None`:
    /// `Priority::MAX`).
    pub max_priority: Option<u8>,
    /// The tenant's turns per round when tenants share a busy tool (`None`:
    /// `DEFAULT_DISPATCH_WEIGHT`).
    pub dispatch_weight: Option<u32>,
}

/// ListTasks page sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagePolicy {
    pub default_size: u32,
    pub max_size: u32,
}

impl Default for PagePolicy {
    fn default() -> Self {
        Self {
            default_size: 100,
            max_size: 1000,
        }
    }
}

impl PagePolicy {
    /// Unset or 0 asks for the default; larger than the maximum gets the
    /// maximum (as Google's AIP-158 advises).
    pub fn resolve(&self, requested: Option<u32>) -> u32 {
        match requested {
            None | Some(0) => self.default_size,
            Some(size) => size.min(self.max_size),
        }
    }
}

/// The behaviour every backend applies the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreConfig {
    pub ttl: TtlPolicy,
    /// The advisory poll interval handed to clients with every task.
    pub poll: PollPolicy,
    pub paging: PagePolicy,
    /// The quotas of tenants without their own.
    pub quotas: Quotas,
    /// Tenants with quotas of their own.
    pub tenant_quotas: BTreeMap<TenantId, Quotas>,
    /// Tenants' own concurrency limits per tool (the tenant-limits file):
    /// the `max` of the tool's declared limit, or of one keyed on the
    /// tenant for a tool that declares none.
    pub tenant_concurrency: BTreeMap<TenantId, BTreeMap<crate::domain::ToolName, u32>>,
    /// How many expired tasks one cleanup statement deletes at most, so that
    /// a large backlog never becomes one long-running delete.
    pub cleanup_batch_size: u32,
    /// How long a create's idempotency key keeps naming its task.
    pub idempotency_retention: Duration,
    /// Leases, attempts and retries of dispatched tasks.
    pub execution: ExecutionPolicy,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            ttl: TtlPolicy::default(),
            poll: PollPolicy::default(),
            paging: PagePolicy::default(),
            quotas: Quotas::default(),
            tenant_quotas: BTreeMap::new(),
            tenant_concurrency: BTreeMap::new(),
            cleanup_batch_size: 1000,
            idempotency_retention: crate::domain::DEFAULT_IDEMPOTENCY_RETENTION,
            execution: ExecutionPolicy::default(),
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct InvalidConfig(pub String);

impl StoreConfig {
    /// The quotas `tenant` is held to.
    pub fn quotas_for(&self, tenant: &TenantId) -> Quotas {
        self.tenant_quotas
            .get(tenant)
            .copied()
            .unwrap_or(self.quotas)
    }

    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if let (Some(default), Some(max)) = (self.ttl.default, self.ttl.max)
            && default > max
        {
            return Err(InvalidConfig(
                "the default ttl exceeds the maximum ttl".into(),
            ));
        }
        if self.poll.default.is_zero() || self.poll.min.is_zero() {
            return Err(InvalidConfig("the poll interval must be positive".into()));
        }
        if self.poll.default < self.poll.min {
            return Err(InvalidConfig(
                "the poll interval is below the minimum poll interval".into(),
            ));
        }
        if self.paging.default_size == 0 || self.paging.default_size > self.paging.max_size {
            return Err(InvalidConfig(
                "the default page size must be between 1 and the maximum page size".into(),
            ));
        }
        let every_quota = std::iter::once(&self.quotas).chain(self.tenant_quotas.values());
        if every_quota
            .into_iter()
            .any(|q| q.max_tasks == Some(0) || q.max_tasks_per_session == Some(0))
        {
            return Err(InvalidConfig(
                "a task quota of 0 would refuse every task".into(),
            ));
        }
        let execution = &self.execution;
        if execution.lease_duration < std::time::Duration::from_secs(1) {
            return Err(InvalidConfig(
                "the lease duration must be at least 1s".into(),
            ));
        }
        if execution.republish_after < std::time::Duration::from_secs(1) {
            // Below a second, jobs on their way to a consumer would be sent twice.
            return Err(InvalidConfig(
                "the republish interval must be at least 1s".into(),
            ));
        }
        if execution.default_max_attempts == 0
            || execution.default_max_attempts > execution.max_max_attempts
        {
            return Err(InvalidConfig(
                "the default max attempts must be between 1 and the largest allowed".into(),
            ));
        }
        if self.cleanup_batch_size == 0 {
            return Err(InvalidConfig(
                "the cleanup batch size must be positive".into(),
            ));
        }
        Ok(())
    }
}

impl StoreConfig {
    /// The attempts of a new dispatched task: requested ?? default, within
    /// the allowed range.
    /// A tenant's dispatch weight, by its id as stored (one that does not
    /// parse has the default).
    pub(crate) fn dispatch_weight(&self, tenant: &str) -> u32 {
        crate::domain::TenantId::parse(tenant)
            .ok()
            .and_then(|tenant| self.quotas_for(&tenant).dispatch_weight)
            .unwrap_or(crate::domain::DEFAULT_DISPATCH_WEIGHT)
    }

    /// A dispatch's priority within its tenant's cap (the tenant-limits
    /// file's `max_priority`).
    pub(crate) fn dispatch_priority(
        &self,
        tenant: &crate::domain::TenantId,
        dispatch: &DispatchRequest,
    ) -> Result<crate::domain::Priority, StoreError> {
        let cap = self
            .quotas_for(tenant)
            .max_priority
            .unwrap_or(crate::domain::Priority::MAX);
        crate::domain::Priority::parse(u32::from(dispatch.priority.get()), cap)
            .map_err(|err| StoreError::invalid("dispatch.priority", err))
    }

    /// The attempts a new dispatched task gets (`RetryPolicy::attempts`).
    pub(crate) fn dispatch_attempts(&self, dispatch: &DispatchRequest) -> Result<u32, StoreError> {
        let policy = &self.execution;
        dispatch
            .retry
            .attempts(dispatch.max_attempts, policy)
            .ok_or_else(|| {
                StoreError::invalid(
                    "dispatch.max_attempts",
                    format!("must be between 1 and {}", policy.max_max_attempts),
                )
            })
    }
}

/// The caller's id, or a fresh unguessable one.
pub(crate) fn task_id_or_new(requested: Option<TaskId>) -> Result<TaskId, StoreError> {
    match requested {
        Some(id) => {
            id.check_new()
                .map_err(|err| StoreError::invalid("task_id", err))?;
            Ok(id)
        }
        None => TaskId::generate().map_err(|err| {
            tracing::error!(error = %err, "no randomness for a task id");
            StoreError::Internal("could not generate a task id".into())
        }),
    }
}

/// When a new dispatched task starts, if later than `now` (its creation):
/// the start it asked for, resolved and checked against its `ttl`.
/// INVALID_ARGUMENT for a start it may not have, before anything changes.
pub(crate) fn start_of(
    dispatch: Option<&crate::domain::DispatchRequest>,
    now: chrono::DateTime<chrono::Utc>,
    ttl: Option<crate::domain::Ttl>,
) -> Result<Option<chrono::DateTime<chrono::Utc>>, StoreError> {
    let Some(start) = dispatch.and_then(|d| d.start) else {
        return Ok(None);
    };
    let at = start
        .resolve(now, ttl)
        .map_err(|err| StoreError::invalid("dispatch start time", err))?;
    Ok((at > now).then_some(at))
}

/// A fresh lease token for a claim.
pub(crate) fn new_lease_token() -> Result<crate::domain::LeaseToken, StoreError> {
    crate::domain::LeaseToken::generate().map_err(|err| {
        tracing::error!(error = %err, "no randomness for a lease token");
        StoreError::Internal("could not generate a lease token".into())
    })
}

/// The error for an operation refused because the task is terminal.
pub(crate) fn already_terminal(status: TaskStatus) -> StoreError {
    crate::domain::FenceRefusal::Terminal(status).into()
}

/// The error for GetTaskResult on a task that has no result to give.
pub(crate) fn no_result(status: TaskStatus) -> StoreError {
    crate::error::Refusal::NoResult(status).into()
}

/// The error for a create refused by a quota.
pub(crate) fn quota_reached(limit: &str, max: u64) -> StoreError {
    StoreError::ResourceExhausted(format!(
        "{limit} quota reached: at most {max} unexpired tasks"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_size_resolution() {
        let paging = PagePolicy {
            default_size: 100,
            max_size: 500,
        };
        assert_eq!(paging.resolve(None), 100);
        assert_eq!(paging.resolve(Some(0)), 100);
        assert_eq!(paging.resolve(Some(7)), 7);
        assert_eq!(paging.resolve(Some(10_000)), 500);
    }

    #[test]
    fn config_validation() {
        assert!(StoreConfig::default().validate().is_ok());
        let bad_paging = StoreConfig {
            paging: PagePolicy {
                default_size: 10,
                max_size: 5,
            },
            ..StoreConfig::default()
        };
        assert!(bad_paging.validate().is_err());
        let zero_quota = StoreConfig {
            quotas: Quotas {
                dispatch_weight: None,
                max_priority: None,
                max_tasks: Some(0),
                max_tasks_per_session: None,
            },
            ..StoreConfig::default()
        };
        assert!(zero_quota.validate().is_err());
    }
}
