//! The worker runtime: consume jobs for the tools this worker serves, claim
//! each before running it, run up to `concurrency` attempts at once, and on
//! shutdown stop taking jobs, let running attempts finish within a grace
//! period, then give the rest back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use lapin::options::{
    BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, ConnectionProperties, ExchangeKind};
use serde_json::Value;
use taskstore_proto::jobs::{JobMessage, Topology, is_valid_tool_name};
use taskstore_proto::v1 as pb;
use tokio::sync::{Semaphore, mpsc};
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::Code;
use tonic::transport::Endpoint;

use crate::attempt::Attempt;
use crate::delivery::JobDelivery;
use crate::queue::InProcessQueue;
use crate::report::{Clients, Reporter};
use crate::tool::Tool;

/// A delivery that waits this long for a free slot goes back to the queue
/// for another worker (and never nears RabbitMQ's consumer timeout).
const MAX_SLOT_WAIT: Duration = Duration::from_secs(60);
const MAX_RECONNECT_DELAY: Duration = Duration::from_secs(10);

/// How a worker connects and how much it runs at once.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// The taskstore gRPC endpoint, e.g. `http://127.0.0.1:50051`.
    pub endpoint: String,
    /// Where jobs come from.
    pub source: JobSource,
    /// Shown in task status messages and logs.
    pub worker_id: String,
    /// Attempts run at once.
    pub concurrency: usize,
    /// How long running attempts may take to finish on shutdown.
    pub shutdown_grace: Duration,
}

/// Where a worker takes its jobs from.
#[derive(Debug, Clone)]
pub enum JobSource {
    /// RabbitMQ, with the broker names shared with the service.
    RabbitMq { url: String, topology: Topology },
    /// The queue of the process the worker is embedded in.
    InProcess(InProcessQueue),
}

/// A delivered job and the tool whose queue it came from.
type Incoming = (String, Box<dyn JobDelivery>);

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("invalid tool name {0:?}")]
    InvalidToolName(String),
    #[error("tool {0:?} is registered twice")]
    DuplicateTool(String),
    #[error("no tools to serve")]
    NoTools,
    #[error("invalid endpoint: {0}")]
    Endpoint(#[from] tonic::transport::Error),
}

/// Why a connection to the job queue ended.
#[derive(Debug, thiserror::Error)]
enum QueueLost {
    #[error(transparent)]
    Amqp(#[from] lapin::Error),
    #[error("the job queue stopped delivering (connection lost)")]
    ConsumersEnded,
}

/// A worker and the tools it serves.
pub struct Worker {
    config: WorkerConfig,
    tools: BTreeMap<String, Arc<dyn Tool>>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Worker {
    pub fn new(config: WorkerConfig) -> Self {
        Self {
            config,
            tools: BTreeMap::new(),
        }
    }

    /// Serves `tool` under `name`.
    pub fn with_tool(mut self, name: &str, tool: Arc<dyn Tool>) -> Result<Self, WorkerError> {
        if !is_valid_tool_name(name) {
            return Err(WorkerError::InvalidToolName(name.to_owned()));
        }
        if self.tools.insert(name.to_owned(), tool).is_some() {
            return Err(WorkerError::DuplicateTool(name.to_owned()));
        }
        Ok(self)
    }

    pub fn tool_names(&self) -> impl Iterator<Item = &str> {
        self.tools.keys().map(String::as_str)
    }

    /// Runs until `shutdown` fires, then shuts down gracefully.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        if self.tools.is_empty() {
            return Err(WorkerError::NoTools);
        }
        let channel = Endpoint::from_shared(self.config.endpoint.clone())?.connect_lazy();
        let clients = Clients::new(channel);
        let slots = Arc::new(Semaphore::new(self.config.concurrency.max(1)));
        let running = TaskTracker::new();
        let abandon = CancellationToken::new();
        let mut delay = Duration::from_millis(200);
        tracing::info!(worker_id = %self.config.worker_id, tools = ?self.tools.keys().collect::<Vec<_>>(), concurrency = self.config.concurrency, "worker starting");

        while !shutdown.is_cancelled() {
            match self
                .consume(&clients, &slots, &running, &abandon, &shutdown)
                .await
            {
                Ok(()) => break,
                Err(err) => {
                    tracing::warn!(error = %err, retry_in_ms = delay.as_millis() as u64, "job queue unavailable; reconnecting");
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                }
            }
        }

        running.close();
        tracing::info!(
            running = running.len(),
            grace_secs = self.config.shutdown_grace.as_secs_f64(),
            "worker stopping: no new jobs; waiting for running attempts"
        );
        if tokio::time::timeout(self.config.shutdown_grace, running.wait())
            .await
            .is_err()
        {
            tracing::warn!(
                running = running.len(),
                "grace period over; giving the remaining tasks back"
            );
            abandon.cancel();
            running.wait().await;
        }
        tracing::info!("worker stopped");
        Ok(())
    }

    /// One connection's life: returns `Ok` on shutdown, `Err` when the
    /// connection is lost (the caller reconnects).
    async fn consume(
        &self,
        clients: &Clients,
        slots: &Arc<Semaphore>,
        running: &TaskTracker,
        abandon: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> Result<(), QueueLost> {
        let (deliveries, incoming) = mpsc::channel::<Incoming>(self.config.concurrency.max(1));
        match &self.config.source {
            JobSource::RabbitMq { url, topology } => {
                let connection = Connection::connect(url, ConnectionProperties::default()).await?;
                let mut channels = Vec::new();
                for tool in self.tools.keys() {
                    let channel = self
                        .subscribe(&connection, topology, tool, deliveries.clone())
                        .await?;
                    channels.push(channel);
                }
                drop(deliveries);
                tracing::info!("consuming jobs from RabbitMQ");
                let result = self
                    .dispatch_jobs(incoming, clients, slots, running, abandon, shutdown)
                    .await;
                // Unacknowledged deliveries go back to their queues when the
                // channels close.
                for channel in channels {
                    let _ = channel.close(200, "worker stopping".into()).await;
                }
                let _ = connection.close(200, "worker stopping".into()).await;
                result
            }
            JobSource::InProcess(queue) => {
                for tool in self.tools.keys() {
                    let (consumer, deliveries, tool) =
                        (queue.consumer(tool), deliveries.clone(), tool.clone());
                    let shutdown = shutdown.clone();
                    tokio::spawn(async move {
                        loop {
                            let next = tokio::select! {
                                () = shutdown.cancelled() => return,
                                next = consumer.next() => next,
                            };
                            let Some(delivery) = next else { return };
                            let delivery: Box<dyn JobDelivery> = Box::new(delivery);
                            if deliveries.send((tool.clone(), delivery)).await.is_err() {
                                return;
                            }
                        }
                    });
                }
                drop(deliveries);
                tracing::info!("consuming jobs from the in-process queue");
                self.dispatch_jobs(incoming, clients, slots, running, abandon, shutdown)
                    .await
            }
        }
    }

    /// Hands each delivered job to a free slot until shutdown.
    async fn dispatch_jobs(
        &self,
        mut incoming: mpsc::Receiver<Incoming>,
        clients: &Clients,
        slots: &Arc<Semaphore>,
        running: &TaskTracker,
        abandon: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> Result<(), QueueLost> {
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                next = incoming.recv() => next,
            };
            let Some((tool, delivery)) = next else {
                return Err(QueueLost::ConsumersEnded);
            };
            let permit = tokio::select! {
                () = shutdown.cancelled() => {
                    delivery.requeue().await;
                    return Ok(());
                }
                permit = tokio::time::timeout(MAX_SLOT_WAIT, slots.clone().acquire_owned()) => permit,
            };
            match permit {
                Ok(Ok(permit)) => {
                    // Claim and run in a task of their own, so this loop
                    // takes the next delivery at once; the slot (permit)
                    // bounds how many are in flight.
                    let claimant = Claimant {
                        clients: clients.clone(),
                        worker_id: self.config.worker_id.clone(),
                        tool: self.tools.get(&tool).cloned(),
                        tool_name: tool,
                    };
                    let abandon = abandon.clone();
                    running.spawn(async move {
                        claimant.claim_and_run(delivery, abandon).await;
                        drop(permit);
                    });
                }
                // Every slot stayed busy: let another worker take it.
                _ => delivery.requeue().await,
            }
        }
    }

    async fn subscribe(
        &self,
        connection: &Connection,
        topology: &Topology,
        tool: &str,
        deliveries: mpsc::Sender<Incoming>,
    ) -> Result<Channel, lapin::Error> {
        let channel = connection.create_channel().await?;
        let exchange = topology.exchange();
        channel
            .exchange_declare(
                exchange.as_str().into(),
                ExchangeKind::Direct,
                ExchangeDeclareOptions {
                    durable: true,
                    ..ExchangeDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await?;
        let prefetch = u16::try_from(self.config.concurrency)
            .unwrap_or(u16::MAX)
            .max(1);
        channel
            .basic_qos(prefetch, BasicQosOptions::default())
            .await?;
        let queue = topology.tool_queue(tool);
        let mut arguments = FieldTable::default();
        arguments.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        channel
            .queue_declare(
                queue.as_str().into(),
                QueueDeclareOptions {
                    durable: true,
                    ..QueueDeclareOptions::default()
                },
                arguments,
            )
            .await?;
        channel
            .queue_bind(
                queue.as_str().into(),
                exchange.as_str().into(),
                tool.into(),
                QueueBindOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let tag = format!("{}/{tool}", self.config.worker_id);
        let mut consumer = channel
            .basic_consume(
                queue.as_str().into(),
                tag.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
        let tool = tool.to_owned();
        tokio::spawn(async move {
            while let Some(Ok(delivery)) = consumer.next().await {
                let delivery: Box<dyn JobDelivery> = Box::new(delivery);
                if deliveries.send((tool.clone(), delivery)).await.is_err() {
                    return;
                }
            }
        });
        Ok(channel)
    }
}

/// Everything needed to claim one delivered job and run it.
struct Claimant {
    clients: Clients,
    worker_id: String,
    tool_name: String,
    tool: Option<Arc<dyn Tool>>,
}

impl Claimant {
    /// Claims the job's task and, when the claim succeeds, runs it.
    async fn claim_and_run(self, delivery: Box<dyn JobDelivery>, abandon: CancellationToken) {
        let job = match JobMessage::from_bytes(delivery.data()) {
            Ok(job) if job.tool == self.tool_name => job,
            other => {
                tracing::warn!(?other, "malformed job dropped");
                delivery.reject().await;
                return;
            }
        };
        let Some(tool) = self.tool else {
            delivery.requeue().await;
            return;
        };
        let request = pb::ClaimTaskRequest {
            task_id: job.task_id.clone(),
            generation: job.generation,
            worker_id: self.worker_id,
            tenant_id: job.tenant_id.clone(),
        };
        let claim = match self.clients.execution.clone().claim_task(request).await {
            Ok(claim) => claim.into_inner(),
            Err(status)
                if matches!(
                    status.code(),
                    Code::FailedPrecondition | Code::NotFound | Code::InvalidArgument
                ) =>
            {
                tracing::info!(task_id = %job.task_id, reason = %status.message(), "stale job dropped");
                delivery.ack().await;
                return;
            }
            Err(status) => {
                tracing::warn!(task_id = %job.task_id, error = %status.message(), "cannot claim now; job back to the queue");
                tokio::time::sleep(Duration::from_secs(1)).await;
                delivery.requeue().await;
                return;
            }
        };
        // Claimed: PostgreSQL now owns the task's fate (lease, reaper), so
        // the delivery is done, however long the task runs.
        delivery.ack().await;
        let attempt = Attempt {
            reporter: Reporter::new(self.clients, job.tenant_id, job.task_id, claim.lease_token),
            tool,
            arguments: arguments_of(&claim.request_json),
            attempt: claim.attempt,
            max_attempts: claim.max_attempts,
            lease_duration: claim
                .lease_duration
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or(Duration::from_secs(15)),
        };
        attempt.run(abandon).await;
    }
}

/// `params.arguments` of a `tools/call` request; `{}` when absent.
fn arguments_of(request_json: &str) -> Value {
    serde_json::from_str::<Value>(request_json)
        .ok()
        .and_then(|request| request.get("params")?.get("arguments").cloned())
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()))
}
