//! What operators and the fleet's bookkeeping need from a backend: the
//! worker registry, the outbox backlog, and a health check.

use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{OutboxBacklog, Reach, TaskStatus, WorkerHeartbeat, WorkerId, WorkerInfo};
use crate::error::StoreError;

#[async_trait]
pub trait OperationsStore: Send + Sync + 'static {
    /// Records a worker's report; its first report is when it was first
    /// seen. Reports from every replica land in one registry, which files
    /// each worker under its id and the reach of the credentials that
    /// announced it (`WorkerHeartbeat::reach`): a report of one reach
    /// never changes a worker of another.
    async fn record_heartbeat(&self, heartbeat: &WorkerHeartbeat) -> Result<(), StoreError>;

    /// Forgets, at once, the worker `worker` that credentials of `reach`
    /// announced (it is shutting down); a worker of another reach stays.
    async fn forget_worker(&self, worker: &WorkerId, reach: &Reach) -> Result<(), StoreError>;

    /// The workers that reported within `within`, by id.
    async fn workers(&self, within: Duration) -> Result<Vec<WorkerInfo>, StoreError>;

    /// Deletes workers that have not reported for `unseen_for`; returns how
    /// many.
    async fn forget_silent_workers(&self, unseen_for: Duration) -> Result<u64, StoreError>;

    /// Unexpired tasks by status (a scan of the tenant-wide table: the
    /// metrics snapshot runs it on an interval of its own).
    async fn tasks_by_status(&self) -> Result<Vec<(TaskStatus, u64)>, StoreError>;

    /// What waits in the outbox.
    async fn outbox_backlog(&self) -> Result<OutboxBacklog, StoreError>;

    /// What governed dispatch holds back now, per tool and key (reads of
    /// small tables and the ready index: a status call or a metrics
    /// snapshot, not a hot path).
    async fn dispatch_view(&self) -> Result<Vec<crate::domain::ToolDispatch>, StoreError>;

    /// Lifts the pause of `key` of `tool`, and makes due now the jobs of
    /// its tasks that waited for it; whether it was paused.
    async fn lift_pause(&self, tool: &str, key: &str) -> Result<bool, StoreError>;

    /// One round trip to the store; an error says why it is unhealthy.
    async fn ping(&self) -> Result<(), StoreError>;

    /// A secret key for `label`, the same on every replica of this store
    /// (derived from the key its cursors are signed with).
    fn shared_key(&self, label: &str) -> [u8; 32];
}
