//! GetTaskExecution: how a dispatched task is being run (its attempt, who
//! holds its lease), for `taskstore get`. Read where the dashboard reads
//! it ([`TaskInsights::task_details`]), after the same lookup as GetTask,
//! so a task another session or tenant owns is NOT_FOUND here too.

use std::sync::Arc;

use tonic::{Request, Response, Status};

use super::convert::timestamp;
use super::pb;
use super::service::TaskStoreService;
use crate::domain::TaskDetails;
use crate::store::TaskInsights;

impl TaskStoreService {
    /// Answers GetTaskExecution from `insights` (the store's own reads).
    pub fn with_insights(mut self, insights: Arc<dyn TaskInsights>) -> Self {
        self.insights = Some(insights);
        self
    }

    pub(super) async fn task_execution(
        &self,
        request: Request<pb::GetTaskRequest>,
    ) -> Result<Response<pb::TaskExecutionState>, Status> {
        let Some(insights) = &self.insights else {
            return Err(Status::unimplemented(
                "this service keeps no execution details of tasks",
            ));
        };
        let edge = self.edge(&request)?;
        let req = request.into_inner();
        let (scope, task_id) = self.lookup(&edge, &req.task_id, req.session_id.as_deref())?;
        // The session's check: the details are read by tenant.
        self.store.get_task(&scope, &task_id).await?;
        let details = insights.task_details(&scope.tenant, &task_id).await?;
        Ok(Response::new(execution_of(&details)))
    }
}

fn execution_of(details: &TaskDetails) -> pb::TaskExecutionState {
    pb::TaskExecutionState {
        attempt: details.attempt,
        max_attempts: details.max_attempts,
        lease_holder: details.lease_owner.clone(),
        lease_expires_at: details.lease_expires_at.map(timestamp),
    }
}
