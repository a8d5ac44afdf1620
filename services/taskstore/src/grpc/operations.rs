//! `mcp.tasks.v1.Operations`: the service's view of its dependencies, for
//! `taskstore status` and operators. It answers even when the database or
//! the queue is down: saying so is its job.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::{Request, Response, Status};

use super::convert::{duration, timestamp};
use super::pb;
use super::pb::operations_server::{Operations as OperationsRpc, OperationsServer};
use crate::domain::{
    FleetPolicy, ToolName, WorkerId, WorkerInfo, differing_descriptions, served_tools,
};
use crate::health::{DATABASE_SHORTAGES, QueueHealth};
use crate::store::operations::OperationsStore;

/// A status check waits this long for the database at most.
const PING_TIMEOUT: Duration = Duration::from_secs(3);

/// What the status reports about the service's own wiring.
#[derive(Debug, Clone)]
pub struct ServiceFacts {
    /// `postgres`, `sqlite` or `memory`.
    pub backend: &'static str,
    /// `rabbitmq` or `in-process`.
    pub queue_kind: &'static str,
    pub queue: QueueHealth,
}

#[derive(Clone)]
pub struct OperationsService {
    operations: Arc<dyn OperationsStore>,
    fleet: FleetPolicy,
    facts: ServiceFacts,
}

impl std::fmt::Debug for OperationsService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OperationsService")
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

impl OperationsService {
    pub fn new(operations: Arc<dyn OperationsStore>, facts: ServiceFacts) -> Self {
        Self {
            operations,
            fleet: FleetPolicy::default(),
            facts,
        }
    }

    pub fn into_server(self) -> OperationsServer<Self> {
        OperationsServer::new(self)
    }

    async fn database(&self) -> pb::DependencyStatus {
        let started = Instant::now();
        let outcome = tokio::time::timeout(PING_TIMEOUT, self.operations.ping()).await;
        let latency = Some(duration(started.elapsed()));
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(err)) => Some(err.to_string()),
            Err(_) => Some(format!(
                "no answer within {}",
                humantime::format_duration(PING_TIMEOUT)
            )),
        };
        let shortage = DATABASE_SHORTAGES.current(Instant::now());
        pb::DependencyStatus {
            healthy: error.is_none(),
            since: None,
            error: error.unwrap_or_default(),
            latency,
            condition: shortage.map_or_else(String::new, |(shortage, _)| {
                format!(
                    "{} (calls are refused; clients retry)",
                    shortage.description
                )
            }),
            condition_since: shortage.map(|(_, since)| timestamp(since)),
        }
    }

    fn queue(&self) -> pb::DependencyStatus {
        let state = self.facts.queue.snapshot();
        pb::DependencyStatus {
            healthy: state.connected == Some(true),
            since: state.since.map(timestamp),
            error: match state.connected {
                None => "not connected yet".to_owned(),
                _ => state.error.unwrap_or_default(),
            },
            latency: None,
            condition: state.blocked_since.map_or_else(String::new, |_| {
                "blocked: the broker holds publishes (a memory or disk alarm, or overload); jobs wait in the outbox".to_owned()
            }),
            condition_since: state.blocked_since.map(timestamp),
        }
    }
}

fn worker_status(
    worker: &WorkerInfo,
    differing: &BTreeMap<WorkerId, BTreeMap<ToolName, String>>,
) -> pb::WorkerStatus {
    let report = &worker.heartbeat;
    pb::WorkerStatus {
        consuming: report.consuming,
        reach: report.reach.to_string(),
        differing_descriptions: differing
            .get(&report.worker_id)
            .map(|tools| {
                tools
                    .iter()
                    .map(|(name, said)| (name.to_string(), said.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        worker_id: report.worker_id.to_string(),
        tools: report.tools.iter().map(ToString::to_string).collect(),
        slots: report.slots,
        busy: report.busy,
        first_seen_at: Some(timestamp(worker.first_seen_at)),
        last_seen_at: Some(timestamp(worker.last_seen_at)),
    }
}

#[tonic::async_trait]
impl OperationsRpc for OperationsService {
    async fn lift_pause(
        &self,
        request: Request<pb::LiftPauseRequest>,
    ) -> Result<Response<pb::LiftPauseResponse>, Status> {
        let req = request.into_inner();
        let tool = crate::domain::ToolName::parse(&req.tool)
            .map_err(|err| crate::error::StoreError::invalid("tool", err))?;
        if req.key.len() > crate::domain::KeyLimit::MAX_KEY_BYTES {
            return Err(crate::error::StoreError::invalid("key", "is longer than any key").into());
        }
        let lifted = self.operations.lift_pause(tool.as_str(), &req.key).await?;
        tracing::info!(tool = %tool, lifted, "pause lifted");
        Ok(Response::new(pb::LiftPauseResponse { lifted }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        let database = self.database().await;
        // With the database down, what it holds is unknown: say nothing
        // rather than something made up.
        let (outbox, workers, dispatch) = if database.healthy {
            let outbox = self.operations.outbox_backlog().await.ok();
            let workers = self
                .operations
                .workers(self.fleet.seen_within)
                .await
                .unwrap_or_default();
            let dispatch = self.operations.dispatch_view().await.unwrap_or_default();
            (outbox, workers, dispatch)
        } else {
            (None, Vec::new(), Vec::new())
        };
        Ok(Response::new(pb::GetStatusResponse {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            backend: self.facts.backend.to_owned(),
            database: Some(database),
            queue_kind: self.facts.queue_kind.to_owned(),
            queue: Some(self.queue()),
            outbox: outbox.map(|backlog| pb::OutboxStatus {
                jobs: backlog.jobs,
                due: backlog.due,
                oldest_due_age: Some(duration(backlog.oldest_due_age)),
            }),
            tools: served_tools(&workers)
                .into_iter()
                .map(pb::ServedTool::from)
                .collect(),
            dispatch: dispatch.into_iter().map(tool_dispatch).collect(),
            workers: {
                let differing = differing_descriptions(&workers);
                workers
                    .iter()
                    .map(|worker| worker_status(worker, &differing))
                    .collect()
            },
        }))
    }
}

fn tool_dispatch(tool: crate::domain::ToolDispatch) -> pb::ToolDispatchStatus {
    pb::ToolDispatchStatus {
        tool: tool.tool,
        waiting: tool.waiting,
        oldest_wait: Some(duration(tool.oldest_wait)),
        keys: tool
            .keys
            .into_iter()
            .map(|key| pb::KeyDispatchStatus {
                key: key.key,
                waiting: key.waiting,
                running: key.running,
                max_running: key.max_running,
                started: key.started,
                paused_until: key.paused_until.map(super::convert::timestamp),
            })
            .collect(),
    }
}
