//! `mcp.tasks.v1.TaskExecution`: the worker side of dispatched tasks.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::convert::duration;
use super::parse::lease_token;
use super::pb;
use super::pb::task_execution_server::{TaskExecution as TaskExecutionRpc, TaskExecutionServer};
use crate::domain::{ReleaseOutcome, ReleaseReason, Renewal, TaskId, TenantId};
use crate::error::StoreError;
use crate::store::execution::ExecutionStore;

/// The largest dispatch generation any backend stores (a signed 64-bit
/// column in PostgreSQL).
const MAX_GENERATION: u64 = i64::MAX as u64;

/// Longest worker id and release message accepted, in bytes.
const MAX_WORKER_ID_BYTES: usize = 256;
const MAX_RELEASE_MESSAGE_BYTES: usize = 4096;

/// The execution API over any [`ExecutionStore`].
#[derive(Clone)]
pub struct TaskExecutionService {
    store: Arc<dyn ExecutionStore>,
}

impl std::fmt::Debug for TaskExecutionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskExecutionService")
            .finish_non_exhaustive()
    }
}

impl TaskExecutionService {
    pub fn new(store: Arc<dyn ExecutionStore>) -> Self {
        Self { store }
    }

    pub fn into_server(self) -> TaskExecutionServer<Self> {
        TaskExecutionServer::new(self)
    }
}

/// The tenant a worker names; empty means the default tenant.
fn tenant(raw: &str) -> Result<TenantId, StoreError> {
    if raw.is_empty() {
        return Ok(TenantId::default_tenant());
    }
    TenantId::parse(raw).map_err(|err| StoreError::invalid("tenant_id", err))
}

fn task_id(raw: &str) -> Result<TaskId, StoreError> {
    TaskId::parse(raw).map_err(|err| StoreError::invalid("task_id", err))
}

fn bounded_text(field: &str, raw: &str, max: usize) -> Result<(), StoreError> {
    if raw.len() > max {
        return Err(StoreError::invalid(
            field,
            format!("is larger than {max} bytes"),
        ));
    }
    if raw.chars().any(char::is_control) {
        return Err(StoreError::invalid(
            field,
            "must not contain control characters",
        ));
    }
    Ok(())
}

#[tonic::async_trait]
impl TaskExecutionRpc for TaskExecutionService {
    #[tracing::instrument(name = "ClaimTask", skip_all, fields(task_id = %request.get_ref().task_id))]
    async fn claim_task(
        &self,
        request: Request<pb::ClaimTaskRequest>,
    ) -> Result<Response<pb::ClaimTaskResponse>, Status> {
        let req = request.into_inner();
        let tenant = tenant(&req.tenant_id)?;
        let id = task_id(&req.task_id)?;
        if req.worker_id.is_empty() {
            return Err(StoreError::invalid("worker_id", "must be set").into());
        }
        bounded_text("worker_id", &req.worker_id, MAX_WORKER_ID_BYTES)?;
        if req.generation > MAX_GENERATION {
            return Err(StoreError::invalid("generation", "is out of range").into());
        }
        let claim = self
            .store
            .claim(&tenant, &id, req.generation, &req.worker_id)
            .await?;
        tracing::info!(attempt = claim.attempt, worker = %req.worker_id, "task claimed");
        Ok(Response::new(pb::ClaimTaskResponse {
            lease_token: claim.lease_token.as_str().to_owned(),
            lease_duration: Some(duration(claim.lease_duration)),
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            tool: claim.tool.to_string(),
            request_json: claim.request.into_string(),
        }))
    }

    #[tracing::instrument(name = "RenewLease", skip_all, fields(task_id = %request.get_ref().task_id))]
    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        let req = request.into_inner();
        let tenant = tenant(&req.tenant_id)?;
        let id = task_id(&req.task_id)?;
        let lease = lease_token(&req.lease_token)?;
        let response = match self.store.renew(&tenant, &id, &lease).await? {
            Renewal::KeepRunning => pb::RenewLeaseResponse {
                keep_running: true,
                reason: String::new(),
            },
            Renewal::Stop(reason) => {
                tracing::info!(%reason, "worker told to stop");
                pb::RenewLeaseResponse {
                    keep_running: false,
                    reason,
                }
            }
        };
        Ok(Response::new(response))
    }

    #[tracing::instrument(name = "ReleaseTask", skip_all, fields(task_id = %request.get_ref().task_id))]
    async fn release_task(
        &self,
        request: Request<pb::ReleaseTaskRequest>,
    ) -> Result<Response<pb::ReleaseTaskResponse>, Status> {
        let req = request.into_inner();
        let tenant = tenant(&req.tenant_id)?;
        let id = task_id(&req.task_id)?;
        let lease = lease_token(&req.lease_token)?;
        let reason = match pb::ReleaseReason::try_from(req.reason) {
            Ok(pb::ReleaseReason::RetryableError) => ReleaseReason::RetryableError,
            Ok(pb::ReleaseReason::Shutdown) => ReleaseReason::Shutdown,
            Ok(pb::ReleaseReason::Unspecified) => {
                return Err(StoreError::invalid("reason", "must be set").into());
            }
            Err(_) => return Err(StoreError::invalid("reason", "has an unknown value").into()),
        };
        if req.message.len() > MAX_RELEASE_MESSAGE_BYTES {
            return Err(StoreError::invalid("message", "is too long").into());
        }
        let outcome = self
            .store
            .release(&tenant, &id, &lease, reason, &req.message)
            .await?;
        tracing::info!(?reason, ?outcome, "task released");
        Ok(Response::new(match outcome {
            ReleaseOutcome::Retry { after } => pb::ReleaseTaskResponse {
                will_retry: true,
                retry_in: Some(duration(after)),
            },
            ReleaseOutcome::Failed => pb::ReleaseTaskResponse {
                will_retry: false,
                retry_in: None,
            },
        }))
    }
}
