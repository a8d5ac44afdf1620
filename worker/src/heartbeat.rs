//! The worker's reports to the service (TaskExecution.Heartbeat): who it is,
//! what it serves, how busy it is. The first report doubles as the startup
//! check that the service is reachable at `--endpoint`: until it succeeds
//! the worker says why, retries with backoff, and takes no job; refused
//! credentials are not an outage, so the worker stops instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use taskstore_proto::v1 as pb;
use tokio::sync::{Notify, Semaphore};
use tokio_util::sync::CancellationToken;
use tonic::Code;

use pb::task_execution_client::TaskExecutionClient;
use taskstore_proto::credentials::BearerToken;
use taskstore_proto::endpoint::{NOT_THE_GRPC_API, answered_by_no_grpc_service};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

const FIRST_RETRY: Duration = Duration::from_millis(200);
/// Longer than the session's (`session.rs`): a heartbeat keeps the worker's
/// listing fresh (its tools, how busy it is), not its attempts alive.
const MAX_RETRY: Duration = Duration::from_secs(10);
/// The interval used until the service names one.
const DEFAULT_INTERVAL: Duration = Duration::from_secs(10);

/// What a worker reports about itself.
#[derive(Debug, Clone)]
pub(crate) struct Heartbeat {
    /// Untraced: a report every few seconds is housekeeping, not a trace.
    pub client: TaskExecutionClient<InterceptedService<Channel, BearerToken>>,
    pub endpoint: String,
    pub worker_id: String,
    pub tools: Vec<String>,
    /// What each tool is, for MCP clients; sent with every report, so a
    /// restarted service (or a new replica) knows them at once.
    pub descriptions: Vec<pb::ToolDescription>,
    pub slots: Arc<Semaphore>,
    pub concurrency: usize,
    /// Whether it consumes its tools' queues now: a worker that cannot
    /// reach the job queue says so, and serves nothing meanwhile.
    pub consuming: Arc<AtomicBool>,
    /// Told when `consuming` changes: the service hears at once.
    pub consuming_changed: Arc<Notify>,
    /// The broker names it consumes under, when it uses a broker: they
    /// must be the ones the service publishes to.
    pub topology: Option<pb::QueueTopology>,
}

/// A tool's description as the service takes it.
pub(crate) fn description(name: &str, info: &crate::ToolInfo) -> pb::ToolDescription {
    pb::ToolDescription {
        rate: info.rate.as_ref().map(|rate| pb::RateLimit {
            starts: rate.starts,
            per: Some(pb_duration(rate.per)),
            key: rate.key.clone(),
        }),
        name: name.to_owned(),
        title: info.title.clone().unwrap_or_default(),
        description: info.description.clone().unwrap_or_default(),
        input_schema_json: info
            .input_schema
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default(),
        task_support: match info.task_support {
            crate::TaskSupport::Optional => pb::TaskSupport::Optional,
            crate::TaskSupport::Required => pb::TaskSupport::Required,
            crate::TaskSupport::Forbidden => pb::TaskSupport::Forbidden,
        }
        .into(),
        retry: info.retry.as_ref().map(|retry| pb::RetryPolicy {
            max_attempts: retry.max_attempts,
            backoff_base: retry.backoff_base.map(pb_duration),
            backoff_max: retry.backoff_max.map(pb_duration),
            retry_errors: Some(retry.retry_errors),
            retry_lost_workers: Some(retry.retry_lost_workers),
        }),
        concurrency: info.concurrency.as_ref().map(|limit| pb::ConcurrencyLimit {
            max: limit.max,
            key: limit.key.clone(),
        }),
        fairness_key: info.fairness_key.clone().unwrap_or_default(),
    }
}

fn pb_duration(d: Duration) -> prost_types::Duration {
    prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

/// How the first report went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Registered {
    /// The service knows the worker; report again after this long.
    Yes(Duration),
    /// The service predates heartbeats: run without them.
    NotSupported,
    /// Shutdown came first.
    Stopped,
    /// The service refused the worker's credentials or role: retrying
    /// cannot help, so the worker stops (the message says why).
    Refused(String),
}

impl Heartbeat {
    fn request(&self, stopping: bool) -> pb::HeartbeatRequest {
        let slots = u32::try_from(self.concurrency).unwrap_or(u32::MAX);
        let free = u32::try_from(self.slots.available_permits()).unwrap_or(u32::MAX);
        pb::HeartbeatRequest {
            worker_id: self.worker_id.clone(),
            tools: self.tools.clone(),
            slots,
            busy: slots.saturating_sub(free),
            stopping,
            descriptions: self.descriptions.clone(),
            consuming: Some(self.consuming.load(Ordering::Relaxed)),
        }
    }

    async fn send(&self, stopping: bool) -> Result<Duration, tonic::Status> {
        self.exchange(stopping).await.map(|(interval, _)| interval)
    }

    /// A report, and the service's answer: when to report again, and where
    /// it publishes jobs.
    async fn exchange(
        &self,
        stopping: bool,
    ) -> Result<(Duration, Option<pb::QueueTopology>), tonic::Status> {
        let response = self
            .client
            .clone()
            .heartbeat(self.request(stopping))
            .await?
            .into_inner();
        let interval = response
            .interval
            .and_then(|d| Duration::try_from(d).ok())
            .filter(|d| !d.is_zero())
            .unwrap_or(DEFAULT_INTERVAL);
        Ok((interval, response.topology))
    }

    /// Why this worker would wait for jobs that never come: it consumes
    /// under other broker names (a queue prefix, a queue type) than the
    /// service publishes to. Both are named.
    fn topology_mismatch(&self, announced: Option<&pb::QueueTopology>) -> Option<String> {
        let (own, announced) = (self.topology.as_ref()?, announced?);
        if own == announced {
            return None;
        }
        let describe = |t: &pb::QueueTopology| {
            let queue_type = t
                .queue_arguments
                .iter()
                .find(|a| a.name == "x-queue-type")
                .and_then(|a| match &a.value {
                    Some(pb::queue_argument::Value::Text(text)) => Some(text.as_str()),
                    _ => None,
                })
                .unwrap_or("classic");
            format!(
                "exchange {}, queues {}<tool> ({queue_type})",
                t.exchange, t.tool_queue_prefix
            )
        };
        Some(format!(
            "the service at {} publishes jobs to {}, but this worker consumes {}: give the worker the service's --queue-prefix and --queue-type",
            self.endpoint,
            describe(announced),
            describe(own)
        ))
    }

    /// Reports until the service answers, saying why each try failed.
    pub(crate) async fn register(&self, shutdown: &CancellationToken) -> Registered {
        let mut delay = FIRST_RETRY;
        loop {
            match self.exchange(false).await {
                Ok((_, announced)) if self.topology_mismatch(announced.as_ref()).is_some() => {
                    let why = self.topology_mismatch(announced.as_ref());
                    return Registered::Refused(why.unwrap_or_default());
                }
                Ok((interval, _)) => {
                    tracing::info!(endpoint = %self.endpoint, "registered with the taskstore service");
                    return Registered::Yes(interval);
                }
                // An HTTP port (the MCP endpoint, say): no retry finds a
                // taskstore there, and a worker that went on would take jobs
                // it cannot claim.
                Err(status) if answered_by_no_grpc_service(&status) => {
                    return Registered::Refused(format!(
                        "{} is not a taskstore service: {} ({})",
                        self.endpoint,
                        NOT_THE_GRPC_API,
                        status.message()
                    ));
                }
                Err(status) if status.code() == Code::Unimplemented => {
                    tracing::warn!(endpoint = %self.endpoint, "the service does not take worker heartbeats (an older version); running without them");
                    return Registered::NotSupported;
                }
                Err(status) if status.code() == Code::Unauthenticated => {
                    return Registered::Refused(format!(
                        "the service at {} refused this worker's credentials ({}): give a worker key with --token-file or --token (`taskstore keys create --role worker`)",
                        self.endpoint,
                        status.message()
                    ));
                }
                Err(status) if status.code() == Code::PermissionDenied => {
                    return Registered::Refused(format!(
                        "the service at {} does not let these credentials run tasks ({}): workers need a worker key (`taskstore keys create --role worker`)",
                        self.endpoint,
                        status.message()
                    ));
                }
                Err(status) => {
                    tracing::warn!(
                        endpoint = %self.endpoint,
                        error = %describe(&status),
                        retry_in_ms = delay.as_millis() as u64,
                        "cannot reach the taskstore service; is --endpoint right and the service running? retrying"
                    );
                }
            }
            tokio::select! {
                () = shutdown.cancelled() => return Registered::Stopped,
                () = tokio::time::sleep(delay) => {}
            }
            delay = (delay * 2).min(MAX_RETRY);
        }
    }

    /// Reports every `interval` until `stop` fires. A failed report is only
    /// logged: the next one may succeed, and the work goes on meanwhile.
    pub(crate) async fn keep_reporting(self, mut interval: Duration, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(interval) => {}
                () = self.consuming_changed.notified() => {}
            }
            match self.send(false).await {
                Ok(next) => interval = next,
                Err(status) => {
                    tracing::warn!(error = %describe(&status), "heartbeat not delivered; the service may list this worker late");
                }
            }
        }
    }

    /// Says goodbye, so the worker's tools leave ListTools at once.
    pub(crate) async fn goodbye(&self) {
        if let Err(status) = self.send(true).await {
            tracing::debug!(error = %describe(&status), "goodbye not delivered; the service forgets this worker when its reports stop");
        }
    }
}

/// A status in words: tonic's message for transport failures is a bare
/// "transport error", so the innermost cause is added.
fn describe(status: &tonic::Status) -> String {
    match std::error::Error::source(status) {
        Some(source) => format!(
            "{}: {}",
            status.message(),
            taskstore_proto::endpoint::root_cause(source)
        ),
        None => status.message().to_owned(),
    }
}
