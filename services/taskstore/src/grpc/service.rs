//! The gRPC service: parse, call the store, convert. Nothing else.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;

use taskstore_telemetry::propagation::current_traceparent;
use tonic::{Request, Response, Status};
use tracing::Span;

use super::caller::{tenant_of, through_an_attempt};
use super::observe::IncomingTraceparent;
use super::parse::Edge;
use super::pb;
use super::pb::task_store_server::{TaskStore as TaskStoreRpc, TaskStoreServer};
use crate::StoreError;
use crate::domain::InputLimits;
use crate::domain::{
    AdmissionPolicy, FenceRefusal, FleetPolicy, NewTask, Operation, Renewal, Scope, StopReason,
    TaskId, served_tools, served_tools_of,
};
use crate::edge::{Admissions, ToolCatalog};
use crate::edge::{EndOnShutdown, unless_shutting_down};
use crate::store::TaskStore;
use crate::store::execution::ExecutionStore;
use crate::store::operations::OperationsStore;

/// `mcp.tasks.v1.TaskStore` over any [`TaskStore`] backend.
#[derive(Clone)]
pub struct TaskStoreService {
    pub(super) store: Arc<dyn TaskStore>,
    /// Where GetTaskExecution reads a task's attempt and lease (none: it is
    /// UNIMPLEMENTED).
    pub(super) insights: Option<Arc<dyn crate::store::TaskInsights>>,
    /// Where a worker's watch checks the lease of its attempt.
    execution: Arc<dyn ExecutionStore>,
    /// The worker registry, for ListTools.
    operations: Arc<dyn OperationsStore>,
    /// The tools served, for checking a dispatched task's arguments.
    catalog: Arc<ToolCatalog>,
    fleet: FleetPolicy,
    limits: InputLimits,
    max_result_wait: Duration,
    /// Ends open WatchTask streams and waiting GetTaskResult calls.
    shutdown: CancellationToken,
    /// Each tenant's create rate and waiting calls.
    admissions: Arc<Admissions>,
}

impl std::fmt::Debug for TaskStoreService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStoreService")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TaskStoreService {
    pub fn new(
        store: Arc<dyn TaskStore>,
        execution: Arc<dyn ExecutionStore>,
        operations: Arc<dyn OperationsStore>,
        limits: InputLimits,
    ) -> Self {
        Self {
            store,
            insights: None,
            execution,
            operations,
            catalog: Arc::default(),
            fleet: FleetPolicy::default(),
            limits,
            max_result_wait: Duration::from_secs(600),
            shutdown: CancellationToken::new(),
            admissions: Arc::new(Admissions::default()),
        }
    }

    /// Holds each tenant to its create rate and waiting calls.
    pub fn with_admission(mut self, policy: AdmissionPolicy) -> Self {
        self.admissions = Arc::new(Admissions::new(policy));
        self
    }

    /// Holds each tenant to rates and waiting calls shared with other
    /// endpoints of this replica (the MCP gateway).
    pub fn with_admissions(mut self, admissions: Arc<Admissions>) -> Self {
        self.admissions = admissions;
        self
    }

    /// Open streams and waiting calls end with UNAVAILABLE when `shutdown`
    /// fires (the server passes its own shutdown token).
    pub fn with_shutdown(mut self, shutdown: CancellationToken) -> Self {
        self.shutdown = shutdown;
        self
    }

    /// The longest a waiting GetTaskResult blocks, whatever the caller's
    /// deadline (default 10 minutes).
    pub fn with_max_result_wait(mut self, wait: Duration) -> Self {
        self.max_result_wait = wait;
        self
    }

    /// The tonic server for this service, with the message size limits.
    pub fn into_server(self) -> TaskStoreServer<Self> {
        let max = self.limits.max_message_bytes;
        TaskStoreServer::new(self)
            .max_decoding_message_size(max)
            .max_encoding_message_size(max)
    }

    /// The edge for `request`: its limits, and the tenant it acts in.
    pub(super) fn edge<T>(&self, request: &Request<T>) -> Result<Edge<'_>, Status> {
        Ok(Edge::new(&self.limits, tenant_of(request, None)?))
    }

    /// The task a request names, parsed at the edge and recorded on the
    /// request's span.
    pub(super) fn lookup(
        &self,
        edge: &Edge<'_>,
        task_id: &str,
        session: Option<&str>,
    ) -> Result<(Scope, TaskId), Status> {
        record_task_id(task_id);
        Ok(edge.lookup(task_id, session)?)
    }
}

impl TaskStoreService {
    /// Refuses a dispatched task whose arguments its tool's declared
    /// `inputSchema` refuses, before the task exists (a tool no worker
    /// serves now, or that declared no schema, takes any), and gives it
    /// the retry policy its tool declares (none served: the service's).
    async fn prepare_dispatch(&self, scope: &Scope, task: &mut NewTask) -> Result<(), Status> {
        let Some(dispatch) = &mut task.dispatch else {
            return Ok(());
        };
        let served = self
            .catalog
            .tool(
                self.operations.as_ref(),
                &self.fleet,
                &scope.tenant,
                &dispatch.tool,
            )
            .await?;
        let Some(tool) = served else {
            return Ok(());
        };
        tool.description.apply_to(dispatch);
        let arguments = serde_json::from_str::<serde_json::Value>(task.request.as_str())
            .ok()
            .and_then(|request| request.pointer("/params/arguments").cloned())
            .unwrap_or_else(|| serde_json::json!({}));
        self.catalog
            .check_arguments(&tool.description, &arguments)
            .map_err(|why| StoreError::InvalidArgument(why).into())
    }
}

/// The caller's deadline, from the `grpc-timeout` header ("<n><unit>",
/// unit one of H M S m u n).
fn grpc_timeout<T>(request: &Request<T>) -> Option<Duration> {
    let raw = request.metadata().get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = raw.split_at(raw.len().checked_sub(1)?);
    let value: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(value.saturating_mul(3600)),
        "M" => Duration::from_secs(value.saturating_mul(60)),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return None,
    })
}

/// Names the task on the RPC's span (and so on its log lines).
pub(super) fn record_task_id(task_id: &str) {
    // `task_id` for the log lines, `mcp.task.id` for the trace.
    let span = Span::current();
    span.record("task_id", task_id);
    span.record("mcp.task.id", task_id);
}

#[tonic::async_trait]
impl TaskStoreRpc for TaskStoreService {
    async fn create_task(
        &self,
        request: Request<pb::CreateTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        // The task keeps the trace it was created in (this RPC's span), or,
        // when this service exports no traces, the caller's as it came.
        let trace = current_traceparent().or_else(|| {
            request
                .extensions()
                .get::<IncomingTraceparent>()
                .map(|incoming| incoming.0.clone())
        });
        let edge = self.edge(&request)?;
        let (scope, mut new_task) = edge.create(request.into_inner(), trace.as_deref())?;
        self.prepare_dispatch(&scope, &mut new_task).await?;
        self.admissions.admit_create(&scope.tenant)?;
        let task = self.store.create_task(&scope, new_task).await?;
        record_task_id(task.task_id.as_str());
        tracing::debug!("task created");
        Ok(Response::new(task.into()))
    }

    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        through_an_attempt(&request, Operation::ReadTask, false)?;
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        let task = self.store.get_task(&scope, &task_id).await?;
        Ok(Response::new(task.into()))
    }

    async fn get_task_execution(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::TaskExecutionState>, Status> {
        through_an_attempt(&request, Operation::ReadTask, false)?;
        self.task_execution(request).await
    }

    async fn update_task_status(
        &self,
        request: Request<pb::UpdateTaskStatusRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let carries_lease = request.get_ref().lease_token.is_some();
        through_an_attempt(&request, Operation::ReportOnTask, carries_lease)?;
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, update) = edge.update(req)?;
        let task = self.store.update_status(&scope, &task_id, update).await?;
        Ok(Response::new(task.into()))
    }

    async fn store_task_result(
        &self,
        request: Request<pb::StoreTaskResultRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let carries_lease = request.get_ref().lease_token.is_some();
        through_an_attempt(&request, Operation::ReportOnTask, carries_lease)?;
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, result) = edge.store_result(req)?;
        let task = self.store.store_result(&scope, &task_id, result).await?;
        Ok(Response::new(task.into()))
    }

    async fn get_task_result(
        &self,
        request: Request<pb::GetTaskResultRequest>,
    ) -> Result<Response<pb::GetTaskResultResponse>, Status> {
        // Answer shortly before the caller's deadline rather than after it.
        let deadline = grpc_timeout(&request).map(|timeout| timeout.mul_f64(0.9));
        through_an_attempt(&request, Operation::ReadTask, false)?;
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        let result = if req.wait {
            // Held while the call waits.
            let _slot = self.admissions.hold_waiting(&scope.tenant)?;
            let wait = deadline.map_or(self.max_result_wait, |d| d.min(self.max_result_wait));
            let waiting = async {
                Ok::<_, Status>(self.store.wait_for_result(&scope, &task_id, wait).await?)
            };
            unless_shutting_down(&self.shutdown, waiting).await?
        } else {
            self.store.get_result(&scope, &task_id).await?
        };
        Ok(Response::new(pb::GetTaskResultResponse {
            status: pb::TaskStatus::from(result.task.status).into(),
            result_json: result.result.into_string(),
            task: Some(result.task.into()),
        }))
    }

    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let edge = self.edge(&request)?;
        let (scope, page) = edge.list(request.into_inner())?;
        let page = self.store.list_tasks(&scope, page).await?;
        Ok(Response::new(pb::ListTasksResponse {
            tasks: page.tasks.into_iter().map(pb::Task::from).collect(),
            next_cursor: page.next_cursor,
        }))
    }

    type WatchTaskStream = Pin<Box<dyn Stream<Item = Result<pb::Task, Status>> + Send>>;

    async fn watch_task(
        &self,
        request: Request<pb::WatchTaskRequest>,
    ) -> Result<Response<Self::WatchTaskStream>, Status> {
        let carries_lease = request.get_ref().lease_token.is_some();
        through_an_attempt(&request, Operation::ReadTask, carries_lease)?;
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        if let Some(raw) = req.lease_token.as_deref() {
            // The attempt's lease must be the task's current one (checked
            // by a renewal, which the running attempt makes anyway).
            let lease = super::parse::lease_token(raw)?;
            match self
                .execution
                .renew(&scope.tenant, &task_id, &lease)
                .await?
            {
                // Ended with this attempt or cancelled: the watch's first
                // message says so.
                Renewal::KeepRunning
                | Renewal::Stop(StopReason::Cancelled | StopReason::Finished) => {}
                Renewal::Stop(StopReason::Gone) => return Err(StoreError::NotFound.into()),
                Renewal::Stop(StopReason::LeaseLost) => {
                    return Err(StoreError::from(FenceRefusal::LeaseLost).into());
                }
            }
        }
        let slot = self.admissions.hold_waiting(&scope.tenant)?;
        let watch = self.store.watch_task(&scope, &task_id).await?;
        // The slot lives as long as the stream.
        let stream = watch.map(move |item| {
            let _held = &slot;
            item.map(pb::Task::from).map_err(Status::from)
        });
        let stream = EndOnShutdown::new(stream, self.shutdown.clone());
        Ok(Response::new(Box::pin(stream)))
    }

    type WatchTasksStream = Pin<Box<dyn Stream<Item = Result<pb::TaskEvent, Status>> + Send>>;

    async fn watch_tasks(
        &self,
        request: Request<pb::WatchTasksRequest>,
    ) -> Result<Response<Self::WatchTasksStream>, Status> {
        let edge = self.edge(&request)?;
        let scope = edge.scope_of(request.into_inner().session_id.as_deref())?;
        let slot = self.admissions.hold_waiting(&scope.tenant)?;
        let follow = self.store.follow_tasks(&scope).await?;
        // The slot lives as long as the stream.
        let stream = follow.map(move |item| {
            let _held = &slot;
            Ok(pb::TaskEvent::from(item))
        });
        let stream = EndOnShutdown::new(stream, self.shutdown.clone());
        Ok(Response::new(Box::pin(stream)))
    }

    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        let task = self.store.cancel_task(&scope, &task_id).await?;
        Ok(Response::new(task.into()))
    }

    async fn delete_task(
        &self,
        request: Request<pb::DeleteTaskRequest>,
    ) -> Result<Response<pb::DeleteTaskResponse>, Status> {
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        self.store.delete_task(&scope, &task_id).await?;
        tracing::info!(task_id = %task_id, "task deleted on request");
        Ok(Response::new(pb::DeleteTaskResponse {}))
    }

    async fn cleanup_expired(
        &self,
        _request: Request<pb::CleanupExpiredRequest>,
    ) -> Result<Response<pb::CleanupExpiredResponse>, Status> {
        let deleted = self.store.cleanup_expired().await?;
        tracing::info!(deleted, "expired tasks deleted on request");
        Ok(Response::new(pb::CleanupExpiredResponse { deleted }))
    }

    async fn list_tools(
        &self,
        request: Request<pb::ListToolsRequest>,
    ) -> Result<Response<pb::ListToolsResponse>, Status> {
        // A tenant sees the fleet's tools and its own workers'; credentials
        // of every tenant naming none see every worker's (an operator).
        let tenant = match tenant_of(&request, None) {
            Ok(tenant) => Some(tenant),
            Err(_) if super::caller::reaches_every_tenant_unnamed(&request) => None,
            Err(refused) => return Err(refused),
        };
        let workers = self.operations.workers(self.fleet.seen_within).await?;
        let tools = match &tenant {
            Some(tenant) => served_tools_of(tenant, &workers),
            None => served_tools(&workers),
        }
        .into_iter()
        .map(pb::ServedTool::from)
        .collect();
        Ok(Response::new(pb::ListToolsResponse { tools }))
    }

    async fn list_input_requests(
        &self,
        request: Request<pb::ListInputRequestsRequest>,
    ) -> Result<Response<pb::ListInputRequestsResponse>, Status> {
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        let questions = self.store.questions(&scope, &task_id).await?;
        Ok(Response::new(pb::ListInputRequestsResponse {
            input_requests: questions.into_iter().map(pb::InputRequest::from).collect(),
        }))
    }

    async fn hold_task(
        &self,
        request: Request<pb::HoldTaskRequest>,
    ) -> Result<Response<pb::HoldTaskResponse>, Status> {
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, holder, renewing) = edge.hold(&req)?;
        let first = renewing.is_none();
        let outcome = self
            .store
            .hold_task(&scope, &task_id, &holder, renewing.as_ref())
            .await?;
        if first {
            tracing::info!(holder = %holder, "task held by its caller");
        }
        Ok(Response::new(super::convert::hold_to_pb(outcome)))
    }

    async fn answer_input_requests(
        &self,
        request: Request<pb::AnswerInputRequestsRequest>,
    ) -> Result<Response<pb::AnswerInputRequestsResponse>, Status> {
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, answers) = edge.answers(req)?;
        let answered = self
            .store
            .answer_questions(&scope, &task_id, answers)
            .await?;
        tracing::info!(
            taken = answered.taken.len(),
            ignored = answered.ignored.len(),
            "input requests answered"
        );
        let keys =
            |keys: Vec<crate::domain::InputKey>| keys.into_iter().map(|k| k.to_string()).collect();
        Ok(Response::new(pb::AnswerInputRequestsResponse {
            task: Some(answered.task.into()),
            taken: keys(answered.taken),
            ignored: keys(answered.ignored),
        }))
    }
}
