//! The gRPC service: parse, call the store, convert. Nothing else.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio_stream::{Stream, StreamExt};

use tonic::{Request, Response, Status};
use tracing::Span;

use super::limits::InputLimits;
use super::parse::Edge;
use super::pb;
use super::pb::task_store_server::{TaskStore as TaskStoreRpc, TaskStoreServer};
use crate::store::TaskStore;

/// `mcp.tasks.v1.TaskStore` over any [`TaskStore`] backend.
#[derive(Clone)]
pub struct TaskStoreService {
    store: Arc<dyn TaskStore>,
    limits: InputLimits,
    max_result_wait: Duration,
}

impl std::fmt::Debug for TaskStoreService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStoreService")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl TaskStoreService {
    pub fn new(store: Arc<dyn TaskStore>, limits: InputLimits) -> Self {
        Self {
            store,
            limits,
            max_result_wait: Duration::from_secs(600),
        }
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

    fn edge(&self) -> Edge<'_> {
        Edge::new(&self.limits)
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

fn record_task_id(task_id: &str) {
    Span::current().record("task_id", task_id);
}

#[tonic::async_trait]
impl TaskStoreRpc for TaskStoreService {
    #[tracing::instrument(name = "CreateTask", skip_all, fields(task_id))]
    async fn create_task(
        &self,
        request: Request<pb::CreateTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let (scope, new_task) = self.edge().create(request.into_inner())?;
        let task = self.store.create_task(&scope, new_task).await?;
        record_task_id(task.task_id.as_str());
        tracing::debug!("task created");
        Ok(Response::new(task.into()))
    }

    #[tracing::instrument(name = "GetTask", skip_all, fields(task_id))]
    async fn get_task(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id) = self
            .edge()
            .lookup(&req.task_id, req.session_id.as_deref())?;
        let task = self.store.get_task(&scope, &task_id).await?;
        Ok(Response::new(task.into()))
    }

    #[tracing::instrument(name = "UpdateTaskStatus", skip_all, fields(task_id))]
    async fn update_task_status(
        &self,
        request: Request<pb::UpdateTaskStatusRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, update) = self.edge().update(req)?;
        let task = self.store.update_status(&scope, &task_id, update).await?;
        Ok(Response::new(task.into()))
    }

    #[tracing::instrument(name = "StoreTaskResult", skip_all, fields(task_id))]
    async fn store_task_result(
        &self,
        request: Request<pb::StoreTaskResultRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id, result) = self.edge().store_result(req)?;
        let task = self.store.store_result(&scope, &task_id, result).await?;
        Ok(Response::new(task.into()))
    }

    #[tracing::instrument(name = "GetTaskResult", skip_all, fields(task_id))]
    async fn get_task_result(
        &self,
        request: Request<pb::GetTaskResultRequest>,
    ) -> Result<Response<pb::GetTaskResultResponse>, Status> {
        // Answer shortly before the caller's deadline rather than after it.
        let deadline = grpc_timeout(&request).map(|timeout| timeout.mul_f64(0.9));
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id) = self
            .edge()
            .lookup(&req.task_id, req.session_id.as_deref())?;
        let result = if req.wait {
            let wait = deadline.map_or(self.max_result_wait, |d| d.min(self.max_result_wait));
            self.store.wait_for_result(&scope, &task_id, wait).await?
        } else {
            self.store.get_result(&scope, &task_id).await?
        };
        Ok(Response::new(pb::GetTaskResultResponse {
            status: pb::TaskStatus::from(result.task.status).into(),
            result_json: result.result.into_string(),
            task: Some(result.task.into()),
        }))
    }

    #[tracing::instrument(name = "ListTasks", skip_all)]
    async fn list_tasks(
        &self,
        request: Request<pb::ListTasksRequest>,
    ) -> Result<Response<pb::ListTasksResponse>, Status> {
        let (scope, page) = self.edge().list(request.into_inner())?;
        let page = self.store.list_tasks(&scope, page).await?;
        Ok(Response::new(pb::ListTasksResponse {
            tasks: page.tasks.into_iter().map(pb::Task::from).collect(),
            next_cursor: page.next_cursor,
        }))
    }

    type WatchTaskStream = Pin<Box<dyn Stream<Item = Result<pb::Task, Status>> + Send>>;

    #[tracing::instrument(name = "WatchTask", skip_all, fields(task_id))]
    async fn watch_task(
        &self,
        request: Request<pb::WatchTaskRequest>,
    ) -> Result<Response<Self::WatchTaskStream>, Status> {
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id) = self
            .edge()
            .lookup(&req.task_id, req.session_id.as_deref())?;
        let watch = self.store.watch_task(&scope, &task_id).await?;
        let stream = watch.map(|item| item.map(pb::Task::from).map_err(Status::from));
        Ok(Response::new(Box::pin(stream)))
    }

    #[tracing::instrument(name = "CancelTask", skip_all, fields(task_id))]
    async fn cancel_task(
        &self,
        request: Request<pb::CancelTaskRequest>,
    ) -> Result<Response<pb::Task>, Status> {
        let req = request.into_inner();
        record_task_id(&req.task_id);
        let (scope, task_id) = self
            .edge()
            .lookup(&req.task_id, req.session_id.as_deref())?;
        let task = self.store.cancel_task(&scope, &task_id).await?;
        Ok(Response::new(task.into()))
    }

    #[tracing::instrument(name = "CleanupExpired", skip_all)]
    async fn cleanup_expired(
        &self,
        _request: Request<pb::CleanupExpiredRequest>,
    ) -> Result<Response<pb::CleanupExpiredResponse>, Status> {
        let deleted = self.store.cleanup_expired().await?;
        tracing::info!(deleted, "expired tasks deleted on request");
        Ok(Response::new(pb::CleanupExpiredResponse { deleted }))
    }
}
