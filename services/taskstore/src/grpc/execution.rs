//! `mcp.tasks.v1.TaskExecution`: the worker side of dispatched tasks.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;

use super::attempt_watch::AttemptWatch;
use super::caller::{StreamTenants, tenant_of};
use super::convert::{duration, stop_reason_to_pb};
use super::parse::lease_token;
use super::pb;
use super::pb::task_execution_server::{TaskExecution as TaskExecutionRpc, TaskExecutionServer};
use super::service::record_task_id;
use crate::domain::{
    Claimant, FleetPolicy, ReleaseOutcome, ReleaseReason, Renewal, SessionRenewal, TaskId,
    TenantId, ToolName, WorkerHeartbeat, WorkerId, WorkerSession,
};
use crate::edge::EndOnShutdown;
use crate::error::StoreError;
use crate::store::TaskStore;
use crate::store::execution::ExecutionStore;
use crate::store::operations::OperationsStore;

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
    /// The tasks WatchAttempts follows.
    tasks: Arc<dyn TaskStore>,
    /// Ends WatchAttempts streams (the server passes its own).
    shutdown: CancellationToken,
    /// The worker registry heartbeats go to.
    operations: Arc<dyn OperationsStore>,
    fleet: FleetPolicy,
    /// Where the service publishes jobs (a broker's), told to workers.
    topology: Option<taskstore_proto::jobs::Topology>,
    /// The tools served, to notice workers that describe one differently.
    catalog: Arc<crate::edge::ToolCatalog>,
}

impl std::fmt::Debug for TaskExecutionService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskExecutionService")
            .finish_non_exhaustive()
    }
}

impl TaskExecutionService {
    pub fn new(
        store: Arc<dyn ExecutionStore>,
        operations: Arc<dyn OperationsStore>,
        tasks: Arc<dyn TaskStore>,
    ) -> Self {
        Self {
            store,
            tasks,
            shutdown: CancellationToken::new(),
            operations,
            fleet: FleetPolicy::default(),
            topology: None,
            catalog: Arc::default(),
        }
    }

    /// Tells workers this broker topology in every Heartbeat answer.
    pub fn with_topology(mut self, topology: Option<taskstore_proto::jobs::Topology>) -> Self {
        self.topology = topology;
        self
    }

    /// Open WatchAttempts streams end with UNAVAILABLE when `shutdown`
    /// fires (the server passes its own shutdown token).
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    pub fn into_server(self) -> TaskExecutionServer<Self> {
        TaskExecutionServer::new(self)
    }
}

/// A claim's session: none when empty.
fn optional_session(raw: &str) -> Result<Option<WorkerSession>, StoreError> {
    if raw.is_empty() {
        return Ok(None);
    }
    WorkerSession::parse(raw)
        .map(Some)
        .map_err(|err| StoreError::invalid("session_id", err))
}

/// The tenant a worker's request acts in: the one its job names (empty:
/// none named), within what the worker's credentials reach.
fn tenant<T>(request: &Request<T>, raw: &str) -> Result<TenantId, Status> {
    let named = if raw.is_empty() {
        None
    } else {
        Some(TenantId::parse(raw).map_err(|err| StoreError::invalid("tenant_id", err))?)
    };
    tenant_of(request, named)
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
    async fn claim_task(
        &self,
        request: Request<pb::ClaimTaskRequest>,
    ) -> Result<Response<pb::ClaimTaskResponse>, Status> {
        let tenant = tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let id = task_id(&req.task_id)?;
        if req.worker_id.is_empty() {
            return Err(StoreError::invalid("worker_id", "must be set").into());
        }
        bounded_text("worker_id", &req.worker_id, MAX_WORKER_ID_BYTES)?;
        if req.generation > MAX_GENERATION {
            return Err(StoreError::invalid("generation", "is out of range").into());
        }
        let claimant = Claimant {
            worker: req.worker_id.clone(),
            session: optional_session(&req.session_id)?,
        };
        let claim = self
            .store
            .claim_as(&tenant, &id, req.generation, &claimant)
            .await?;
        tracing::info!(attempt = claim.attempt, worker = %req.worker_id, "task claimed");
        crate::metrics::claimed(claim.tool.as_str(), claim.attempt, claim.waited);
        Ok(Response::new(pb::ClaimTaskResponse {
            lease_token: claim.lease_token.as_str().to_owned(),
            lease_duration: Some(duration(claim.lease_duration)),
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            tool: claim.tool.to_string(),
            request_json: claim.request.into_string(),
            in_session: claim.in_session,
        }))
    }

    async fn renew_lease(
        &self,
        request: Request<pb::RenewLeaseRequest>,
    ) -> Result<Response<pb::RenewLeaseResponse>, Status> {
        let tenant = tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let id = task_id(&req.task_id)?;
        let lease = lease_token(&req.lease_token)?;
        let response = match self.store.renew(&tenant, &id, &lease).await? {
            Renewal::KeepRunning => pb::RenewLeaseResponse {
                keep_running: true,
                reason: String::new(),
                stop_reason: pb::StopReason::Unspecified.into(),
            },
            Renewal::Stop(reason) => {
                tracing::info!(%reason, "worker told to stop");
                pb::RenewLeaseResponse {
                    keep_running: false,
                    reason: reason.to_string(),
                    stop_reason: stop_reason_to_pb(reason).into(),
                }
            }
        };
        Ok(Response::new(response))
    }

    async fn renew_session(
        &self,
        request: Request<pb::RenewSessionRequest>,
    ) -> Result<Response<pb::RenewSessionResponse>, Status> {
        let req = request.into_inner();
        let session = WorkerSession::parse(&req.session_id)
            .map_err(|err| StoreError::invalid("session_id", err))?;
        if req.worker_id.is_empty() {
            return Err(StoreError::invalid("worker_id", "must be set").into());
        }
        bounded_text("worker_id", &req.worker_id, MAX_WORKER_ID_BYTES)?;
        let renewal = self
            .store
            .renew_session(&req.worker_id, &session, req.open)
            .await?;
        let response = match renewal {
            SessionRenewal::KeepRunning { lease_duration } => pb::RenewSessionResponse {
                keep_running: true,
                lease_duration: Some(duration(lease_duration)),
            },
            SessionRenewal::Over => {
                tracing::warn!(worker = %req.worker_id, "worker session over; its attempts must stop");
                pb::RenewSessionResponse {
                    keep_running: false,
                    lease_duration: None,
                }
            }
        };
        Ok(Response::new(response))
    }

    type WatchAttemptsStream = EndOnShutdown<ReceiverStream<Result<pb::AttemptNews, Status>>>;

    async fn watch_attempts(
        &self,
        request: Request<Streaming<pb::WatchAttemptsRequest>>,
    ) -> Result<Response<Self::WatchAttemptsStream>, Status> {
        let watch = AttemptWatch {
            tasks: self.tasks.clone(),
            execution: self.store.clone(),
            tenants: StreamTenants::of(&request)?,
        };
        let stream = watch.serve(request.into_inner());
        Ok(Response::new(EndOnShutdown::new(
            stream,
            self.shutdown.clone(),
        )))
    }

    async fn release_task(
        &self,
        request: Request<pb::ReleaseTaskRequest>,
    ) -> Result<Response<pb::ReleaseTaskResponse>, Status> {
        let tenant = tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let id = task_id(&req.task_id)?;
        let lease = lease_token(&req.lease_token)?;
        let reason = match pb::ReleaseReason::try_from(req.reason) {
            Ok(pb::ReleaseReason::RetryableError) => ReleaseReason::RetryableError,
            Ok(pb::ReleaseReason::Shutdown) => ReleaseReason::Shutdown,
            Ok(pb::ReleaseReason::Parked) => ReleaseReason::Parked,
            Ok(pb::ReleaseReason::BackOff) => ReleaseReason::BackOff {
                wait: back_off_wait(req.back_off_until.as_ref())?,
            },
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
                parked: false,
            },
            ReleaseOutcome::Failed => pb::ReleaseTaskResponse {
                will_retry: false,
                retry_in: None,
                parked: false,
            },
            ReleaseOutcome::Parked => pb::ReleaseTaskResponse {
                will_retry: false,
                retry_in: None,
                parked: true,
            },
        }))
    }

    async fn ask_question(
        &self,
        request: Request<pb::AskQuestionRequest>,
    ) -> Result<Response<pb::AskQuestionResponse>, Status> {
        let tenant = tenant(&request, &request.get_ref().tenant_id)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let id = task_id(&req.task_id)?;
        let lease = lease_token(&req.lease_token)?;
        let (key, question) = super::parse::question(&req.key, req.request_json)?;
        let answer = self
            .store
            .ask(&tenant, &id, &lease, &key, &question)
            .await?;
        tracing::info!(key = %key, answered = answer.is_some(), "input request asked");
        Ok(Response::new(pb::AskQuestionResponse {
            answer_json: answer.map(crate::domain::JsonObject::into_string),
        }))
    }

    async fn heartbeat(
        &self,
        request: Request<pb::HeartbeatRequest>,
    ) -> Result<Response<pb::HeartbeatResponse>, Status> {
        // Who announces it: a worker of one reach never changes another's.
        let reach = super::caller::caller_of(&request)?.reach.clone();
        let req = request.into_inner();
        let worker =
            WorkerId::parse(&req.worker_id).map_err(|err| StoreError::invalid("worker_id", err))?;
        if req.stopping {
            self.operations.forget_worker(&worker, &reach).await?;
            tracing::info!("worker stopped; forgotten");
        } else {
            if req.tools.len() > WorkerHeartbeat::MAX_TOOLS {
                return Err(StoreError::invalid(
                    "tools",
                    format!("has more than {} entries", WorkerHeartbeat::MAX_TOOLS),
                )
                .into());
            }
            let tools = req
                .tools
                .iter()
                .map(|t| ToolName::parse(t).map_err(|err| StoreError::invalid("tools", err)))
                .collect::<Result<Vec<_>, _>>()?;
            let descriptions = super::parse::tool_descriptions(req.descriptions)?;
            let heartbeat = WorkerHeartbeat::new(worker, tools, req.slots, req.busy)
                .with_descriptions(descriptions)
                .announced_by(reach)
                .consuming(req.consuming.unwrap_or(true));
            self.operations.record_heartbeat(&heartbeat).await?;
            tracing::debug!("worker reported");
            self.catalog
                .note_disagreements(self.operations.as_ref(), &self.fleet)
                .await;
        }
        Ok(Response::new(pb::HeartbeatResponse {
            interval: Some(duration(self.fleet.heartbeat_interval)),
            topology: self.topology.as_ref().map(|t| t.to_pb()),
        }))
    }
}

/// How long a back-off waits: until `until`, from now (a time passed is
/// no wait); required, and at most `MAX_BACK_OFF` ahead.
fn back_off_wait(until: Option<&prost_types::Timestamp>) -> Result<std::time::Duration, Status> {
    let until = until.ok_or_else(|| {
        StoreError::invalid("back_off_until", "is required with RELEASE_REASON_BACK_OFF")
    })?;
    let until = chrono::DateTime::from_timestamp(
        until.seconds,
        u32::try_from(until.nanos).unwrap_or(u32::MAX),
    )
    .ok_or_else(|| StoreError::invalid("back_off_until", "is not a time"))?;
    let wait = (until - chrono::Utc::now()).to_std().unwrap_or_default();
    if wait > crate::domain::MAX_BACK_OFF {
        return Err(StoreError::invalid("back_off_until", "is more than 24h ahead").into());
    }
    Ok(wait)
}
