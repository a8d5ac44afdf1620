//! [`GrpcTaskStore`] as a [`TaskStore`]: each method one RPC (or a watch
//! stream), its request built from domain types and its answer parsed back.

use std::time::Duration;

use async_trait::async_trait;
use tokio_stream::StreamExt;

use super::client::{GrpcTaskStore, session_of, status_to_pb};
use super::convert::{followed_from_pb, question_from_pb, task_from_pb};
use super::pb;
use super::status::store_error_from_status;
use crate::domain::{
    Answered, Answers, InputKey, NewResult, NewTask, PageRequest, Question, Scope, StartTime,
    StatusUpdate, Task, TaskId, TaskPage, TaskResult, TtlRequest,
};
use crate::error::StoreError;
use crate::store::{Followed, QuestionStore, TaskFollow, TaskStore, TaskWatch};

#[async_trait]
impl TaskStore for GrpcTaskStore {
    async fn create_task(&self, scope: &Scope, task: NewTask) -> Result<Task, StoreError> {
        let requested_id = task.task_id.as_ref().map(ToString::to_string);
        let trace = task.trace_context.clone();
        let message = pb::CreateTaskRequest {
            task_id: task.task_id.map(|id| id.to_string()),
            session_id: session_of(scope)?,
            ttl: match task.ttl {
                TtlRequest::Of(ttl) => Some(super::convert::duration(ttl.as_duration())),
                TtlRequest::ServerDefault | TtlRequest::Unlimited => None,
            },
            no_expiry: task.ttl == TtlRequest::Unlimited,
            poll_interval: task.poll_interval.map(super::convert::duration),
            request_id_json: task.request_id.as_str().to_owned(),
            request_json: task.request.into_string(),
            dispatch: task.dispatch.map(|d| pb::Dispatch {
                tool: Some(d.tool.to_string()),
                max_attempts: d.max_attempts,
                start_at: match d.start {
                    Some(StartTime::At(at)) => Some(super::convert::timestamp(at)),
                    _ => None,
                },
                start_after: match d.start {
                    Some(StartTime::After(after)) => Some(super::convert::duration(after)),
                    _ => None,
                },
                priority: (d.priority.get() > 0).then(|| u32::from(d.priority.get())),
            }),
            idempotency_key: task.idempotency_key.map(|key| key.as_str().to_owned()),
        };
        let mut request = tonic::Request::new(message);
        // The task's trace travels as the call's `traceparent`; when this
        // process traces, the call's own span (in the current trace)
        // replaces it on the way out.
        if let Some(value) = trace.and_then(|t| t.as_str().parse().ok()) {
            request
                .metadata_mut()
                .insert(taskstore_telemetry::propagation::TRACEPARENT, value);
        }
        let task = self.client().create_task(request).await.map_err(|status| {
            match (store_error_from_status(status), requested_id) {
                // The error names the id, as a local backend's does.
                (StoreError::AlreadyExists(_), Some(id)) => StoreError::AlreadyExists(id),
                (other, _) => other,
            }
        })?;
        task_from_pb(task.into_inner())
    }

    async fn get_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        let request = pb::GetTaskRequest {
            task_id: task_id.to_string(),
            session_id: session_of(scope)?,
        };
        let task = self
            .client()
            .get_task(request)
            .await
            .map_err(store_error_from_status)?;
        task_from_pb(task.into_inner())
    }

    async fn update_status(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        update: StatusUpdate,
    ) -> Result<Task, StoreError> {
        let request = pb::UpdateTaskStatusRequest {
            task_id: task_id.to_string(),
            status: status_to_pb(update.status),
            status_message: update.message,
            session_id: session_of(scope)?,
            lease_token: update.lease.map(|l| l.as_str().to_owned()),
        };
        let task = self
            .client()
            .update_task_status(request)
            .await
            .map_err(store_error_from_status)?;
        task_from_pb(task.into_inner())
    }

    async fn store_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        result: NewResult,
    ) -> Result<Task, StoreError> {
        let request = pb::StoreTaskResultRequest {
            task_id: task_id.to_string(),
            status: status_to_pb(result.status.into()),
            result_json: result.result.into_string(),
            session_id: session_of(scope)?,
            status_message: result.message,
            lease_token: result.lease.map(|l| l.as_str().to_owned()),
        };
        let task = self
            .client()
            .store_task_result(request)
            .await
            .map_err(store_error_from_status)?;
        task_from_pb(task.into_inner())
    }

    async fn get_result(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskResult, StoreError> {
        self.fetch_result(scope, task_id, None)
            .await
            .map_err(store_error_from_status)?
    }

    async fn list_tasks(&self, scope: &Scope, page: PageRequest) -> Result<TaskPage, StoreError> {
        let request = pb::ListTasksRequest {
            cursor: page.cursor,
            session_id: session_of(scope)?,
            page_size: page.page_size,
            statuses: page
                .filter
                .statuses()
                .iter()
                .map(|status| status_to_pb(*status))
                .collect(),
            tool: page.filter.tool.map(|tool| tool.to_string()),
        };
        let response = self
            .client()
            .list_tasks(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        let tasks = response
            .tasks
            .into_iter()
            .map(task_from_pb)
            .collect::<Result<_, _>>()?;
        Ok(TaskPage {
            tasks,
            next_cursor: response.next_cursor,
        })
    }

    async fn cancel_task(&self, scope: &Scope, task_id: &TaskId) -> Result<Task, StoreError> {
        let request = pb::CancelTaskRequest {
            task_id: task_id.to_string(),
            session_id: session_of(scope)?,
        };
        let task = self
            .client()
            .cancel_task(request)
            .await
            .map_err(store_error_from_status)?;
        task_from_pb(task.into_inner())
    }

    async fn watch_task(&self, scope: &Scope, task_id: &TaskId) -> Result<TaskWatch, StoreError> {
        let request = pb::WatchTaskRequest {
            lease_token: None,
            task_id: task_id.to_string(),
            session_id: session_of(scope)?,
        };
        let stream = self
            .client()
            .watch_task(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        Ok(Box::pin(stream.map(|item| {
            item.map_err(store_error_from_status).and_then(task_from_pb)
        })))
    }

    async fn follow_tasks(&self, scope: &Scope) -> Result<TaskFollow, StoreError> {
        let request = pb::WatchTasksRequest {
            session_id: session_of(scope)?,
        };
        let stream = self
            .client()
            .watch_tasks(request)
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        // A broken stream (the server stopping) ends the follow after a
        // resync: whoever follows reads again, or follows anew.
        let items = stream.map_while(|item| match item {
            Ok(event) => match followed_from_pb(event) {
                Ok(followed) => Some(followed),
                Err(err) => {
                    tracing::warn!(error = %err, "malformed task event; resyncing");
                    Some(Followed::Resync)
                }
            },
            Err(status) => {
                tracing::debug!(status = %status, "task event stream ended");
                None
            }
        });
        Ok(Box::pin(items.chain(tokio_stream::once(Followed::Resync))))
    }

    async fn wait_for_result(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        timeout: Duration,
    ) -> Result<TaskResult, StoreError> {
        match self.fetch_result(scope, task_id, Some(timeout)).await {
            // Our own deadline passed first: answer as without waiting. (Not
            // on UNAVAILABLE: that may be the service shutting down.)
            Err(status) if deadline_passed(&status) => self.get_result(scope, task_id).await,
            Err(status) => Err(store_error_from_status(status)),
            Ok(result) => result,
        }
    }

    async fn delete_task(&self, scope: &Scope, task_id: &TaskId) -> Result<(), StoreError> {
        self.client()
            .delete_task(pb::DeleteTaskRequest {
                task_id: task_id.to_string(),
                session_id: session_of(scope)?,
            })
            .await
            .map_err(store_error_from_status)?;
        Ok(())
    }

    async fn cleanup_expired(&self) -> Result<u64, StoreError> {
        let response = self
            .client()
            .cleanup_expired(pb::CleanupExpiredRequest {})
            .await
            .map_err(store_error_from_status)?;
        Ok(response.into_inner().deleted)
    }

    async fn hold_task(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &crate::domain::Holder,
        renewing: Option<&crate::domain::LeaseToken>,
    ) -> Result<crate::domain::HoldOutcome, StoreError> {
        let response = self
            .client()
            .hold_task(pb::HoldTaskRequest {
                task_id: task_id.to_string(),
                session_id: session_of(scope)?,
                holder: holder.as_str().to_owned(),
                lease_token: renewing.map(|t| t.as_str().to_owned()).unwrap_or_default(),
            })
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        super::convert::hold_from_pb(response)
    }
}

#[async_trait]
impl QuestionStore for GrpcTaskStore {
    async fn questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        let response = self
            .client()
            .list_input_requests(pb::ListInputRequestsRequest {
                task_id: task_id.to_string(),
                session_id: session_of(scope)?,
            })
            .await
            .map_err(store_error_from_status)?;
        response
            .into_inner()
            .input_requests
            .into_iter()
            .map(question_from_pb)
            .collect()
    }

    async fn answer_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError> {
        let response = self
            .client()
            .answer_input_requests(pb::AnswerInputRequestsRequest {
                task_id: task_id.to_string(),
                session_id: session_of(scope)?,
                answers_json: answers
                    .into_iter()
                    .map(|(key, answer)| (key.to_string(), answer.into_string()))
                    .collect(),
            })
            .await
            .map_err(store_error_from_status)?
            .into_inner();
        let keys = |keys: Vec<String>| {
            keys.iter()
                .map(|k| {
                    InputKey::parse(k).map_err(|err| {
                        StoreError::Internal(format!("malformed key from the server: {err}"))
                    })
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Answered {
            task: task_from_pb(response.task.unwrap_or_default())?,
            taken: keys(response.taken)?,
            ignored: keys(response.ignored)?,
        })
    }
}

/// Whether a call ended because its deadline passed: the service said so
/// (DEADLINE_EXCEEDED), or tonic's own timer fired first, which it reports
/// as CANCELLED "Timeout expired" (`tonic::TimeoutExpired`).
fn deadline_passed(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::DeadlineExceeded => true,
        tonic::Code::Cancelled => status.message() == tonic::TimeoutExpired(()).to_string(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::deadline_passed;

    #[test]
    fn a_deadline_is_the_services_or_tonics_own_timer() {
        assert!(deadline_passed(&tonic::Status::deadline_exceeded("late")));
        assert!(deadline_passed(&tonic::Status::cancelled(
            "Timeout expired"
        )));
        assert!(!deadline_passed(&tonic::Status::cancelled(
            "the caller went away"
        )));
        assert!(!deadline_passed(&tonic::Status::unavailable(
            "Timeout expired"
        )));
    }
}
