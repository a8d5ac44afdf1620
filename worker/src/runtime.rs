//! The worker runtime: register with the service, take jobs for the tools
//! this worker serves from its source (`source`), hand each to a free slot
//! to be claimed and run (`claimant`, `attempt`), and on shutdown stop
//! taking jobs, let running attempts finish within a grace period, then give
//! the rest back.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use taskstore_proto::credentials::BearerToken;
use taskstore_proto::endpoint::{ClientTls, InvalidEndpoint, parse_secure_endpoint};
use taskstore_proto::jobs::{Topology, is_valid_tool_name};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tonic::service::interceptor::InterceptedService;

use crate::claimant::Claimant;
use crate::follow::Followers;
use crate::heartbeat::{Heartbeat, Registered};
use crate::metrics;
use crate::report::Clients;
use crate::session::{FIRST_OPEN_WAIT, Session};
use crate::source::{Feed, Incoming, JobSource, QueueLost};
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
    /// How long a tool's question may wait for its answer before the
    /// attempt parks (gives the task back until the answer comes).
    pub park_after: Duration,
    /// The credentials presented on every call to the service.
    pub token: BearerToken,
    /// TLS to an `https://` endpoint: the CA to trust and, for mTLS, the
    /// worker's certificate.
    pub tls: ClientTls,
}

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("invalid tool name {0:?}")]
    InvalidToolName(String),
    #[error("tool {0:?} is registered twice")]
    DuplicateTool(String),
    #[error("no tools to serve")]
    NoTools,
    #[error(transparent)]
    Endpoint(#[from] InvalidEndpoint),
    /// The service refused the worker's credentials or role.
    #[error("{0}")]
    Refused(String),
}

/// What the worker says as it (re)connects to its job source.
struct Connecting {
    /// Told once, when the worker first consumes.
    ready: Option<tokio::sync::oneshot::Sender<()>>,
    /// Whether an outage was reported: one warning per outage, the retries
    /// behind it are debug lines.
    outage: bool,
}

/// A worker and the tools it serves.
pub struct Worker {
    config: WorkerConfig,
    tools: BTreeMap<String, Arc<dyn Tool>>,
    /// Told once the worker is registered and consuming.
    ready: Option<tokio::sync::oneshot::Sender<()>>,
    /// Whether jobs can reach this worker now (for a readiness probe, and
    /// its heartbeats).
    consuming: Arc<AtomicBool>,
    consuming_changed: Arc<tokio::sync::Notify>,
    /// The session its claims are made in, once open.
    session: Session,
    /// The stream following its running attempts.
    followers: Followers,
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
            ready: None,
            consuming: Arc::default(),
            consuming_changed: Arc::default(),
            session: Session::default(),
            followers: Followers::default(),
        }
    }

    /// Whether the worker consumes jobs at this moment: false before its
    /// consumers are in place, while the queue is lost, and once it stops
    /// taking jobs on shutdown.
    pub fn consuming(&self) -> Arc<AtomicBool> {
        self.consuming.clone()
    }

    /// `ready` is told when the service knows this worker and its consumers
    /// are in place: a job dispatched after that reaches it.
    pub fn with_ready_signal(mut self, ready: tokio::sync::oneshot::Sender<()>) -> Self {
        self.ready = Some(ready);
        self
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
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), WorkerError> {
        if self.tools.is_empty() {
            return Err(WorkerError::NoTools);
        }
        let endpoint = parse_secure_endpoint(&self.config.endpoint, &self.config.tls)?;
        let channel = endpoint.connect_lazy();
        let clients = Clients::new(channel.clone(), self.config.token.clone());
        let concurrency = self.config.concurrency.max(1);
        let slots = Arc::new(Semaphore::new(concurrency));
        metrics::slots(concurrency);
        let running = TaskTracker::new();
        let abandon = CancellationToken::new();
        let mut delay = Duration::from_millis(200);
        tracing::info!(worker_id = %self.config.worker_id, tools = ?self.tools.keys().collect::<Vec<_>>(), concurrency, endpoint = %self.config.endpoint, "worker starting");

        let housekeeping = taskstore_proto::v1::task_execution_client::TaskExecutionClient::new(
            InterceptedService::new(channel, self.config.token.clone()),
        );
        let heartbeat = Heartbeat {
            client: housekeeping.clone(),
            endpoint: self.config.endpoint.clone(),
            worker_id: self.config.worker_id.clone(),
            tools: self.tools.keys().cloned().collect(),
            descriptions: self
                .tools
                .iter()
                .map(|(name, tool)| crate::heartbeat::description(name, &tool.describe()))
                .collect(),
            slots: slots.clone(),
            concurrency,
            consuming: self.consuming.clone(),
            consuming_changed: self.consuming_changed.clone(),
            topology: self.config.source.topology().map(Topology::to_pb),
        };
        let reporting = CancellationToken::new();
        let registered = heartbeat.register(&shutdown).await;
        if let Registered::Refused(why) = &registered {
            return Err(WorkerError::Refused(why.clone()));
        }
        if let Registered::Yes(interval) = &registered {
            tokio::spawn(
                heartbeat
                    .clone()
                    .keep_reporting(*interval, reporting.clone()),
            );
            // Until the running attempts have ended: they live by it.
            tokio::spawn(
                self.followers
                    .clone()
                    .keep(housekeeping.clone(), reporting.clone()),
            );
            tokio::spawn(self.session.clone().keep(
                housekeeping,
                self.config.worker_id.clone(),
                reporting.clone(),
            ));
            // Claims made before the session opens renew their own leases
            // for as long as they run: take jobs once it is open.
            tokio::select! {
                () = self.session.first_settled() => {}
                () = tokio::time::sleep(FIRST_OPEN_WAIT) => {
                    tracing::warn!("no worker session yet; taking jobs without one until it opens");
                }
                () = shutdown.cancelled() => {}
            }
        } else {
            // A service without heartbeats has no per-worker calls either.
            self.followers.unsupported().cancel();
        }
        let mut connecting = Connecting {
            ready: self.ready.take(),
            outage: false,
        };
        while !shutdown.is_cancelled() {
            match self
                .consume(
                    &clients,
                    &slots,
                    &running,
                    &abandon,
                    &shutdown,
                    &mut connecting,
                )
                .await
            {
                Ok(()) => break,
                Err(err) => {
                    if connecting.outage {
                        tracing::debug!(error = %err, retry_in_ms = delay.as_millis() as u64, "job queue still unavailable; reconnecting");
                    } else {
                        tracing::warn!(error = %err, "job queue unavailable; reconnecting with backoff until it is back");
                        connecting.outage = true;
                    }
                    tokio::select! {
                        () = shutdown.cancelled() => break,
                        () = tokio::time::sleep(delay) => {}
                    }
                    delay = (delay * 2).min(MAX_RECONNECT_DELAY);
                }
            }
        }

        running.close();
        let grace = self.config.shutdown_grace;
        if grace.is_zero() {
            tracing::info!(
                running = running.len(),
                "worker stopping: no new jobs; giving running tasks back now (they run again later)"
            );
            abandon.cancel();
            running.wait().await;
        } else {
            tracing::info!(
                running = running.len(),
                grace_secs = grace.as_secs_f64(),
                "worker stopping: no new jobs; waiting for running attempts to finish"
            );
            if tokio::time::timeout(grace, running.wait()).await.is_err() {
                tracing::warn!(
                    running = running.len(),
                    "shutdown grace period over; giving the remaining tasks back"
                );
                abandon.cancel();
                running.wait().await;
            }
        }
        reporting.cancel();
        if let Registered::Yes(_) = registered {
            heartbeat.goodbye().await;
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
        connecting: &mut Connecting,
    ) -> Result<(), QueueLost> {
        let tools: Vec<String> = self.tools.keys().cloned().collect();
        let mut feed = Feed::open(
            &self.config.source,
            &tools,
            self.config.concurrency,
            &self.config.worker_id,
            shutdown,
        )
        .await?;
        if std::mem::take(&mut connecting.outage) {
            tracing::info!("job queue back; consuming again");
        }
        if let Some(ready) = connecting.ready.take() {
            let _ = ready.send(());
        }
        self.consuming.store(true, Ordering::Relaxed);
        self.consuming_changed.notify_one();
        let result = self
            .dispatch_jobs(
                &mut feed.incoming,
                clients,
                slots,
                running,
                abandon,
                shutdown,
            )
            .await;
        self.consuming.store(false, Ordering::Relaxed);
        self.consuming_changed.notify_one();
        feed.close().await;
        result
    }

    /// Hands each delivered job to a free slot until shutdown.
    async fn dispatch_jobs(
        &self,
        incoming: &mut mpsc::Receiver<Incoming>,
        clients: &Clients,
        slots: &Arc<Semaphore>,
        running: &TaskTracker,
        abandon: &CancellationToken,
        shutdown: &CancellationToken,
    ) -> Result<(), QueueLost> {
        loop {
            let next = tokio::select! {
                biased;
                () = shutdown.cancelled() => return Ok(()),
                next = incoming.recv() => next,
            };
            let Some((tool, delivery)) = next else {
                // The consumers also stop on shutdown; that is no outage.
                if shutdown.is_cancelled() {
                    return Ok(());
                }
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
                    let (system, queue) = self.config.source.describe(&tool);
                    let claimant = Claimant {
                        clients: clients.clone(),
                        worker_id: self.config.worker_id.clone(),
                        tool: self.tools.get(&tool).cloned(),
                        tool_name: tool,
                        system,
                        queue,
                        park_after: self.config.park_after,
                        session: self.session.current(),
                        followers: self.followers.clone(),
                    };
                    let abandon = abandon.clone();
                    metrics::slot_busy(true);
                    running.spawn(async move {
                        claimant.claim_and_run(delivery, abandon).await;
                        metrics::slot_busy(false);
                        drop(permit);
                    });
                }
                // Every slot stayed busy: let another worker take it.
                _ => delivery.requeue().await,
            }
        }
    }
}
