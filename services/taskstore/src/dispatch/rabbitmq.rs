//! Jobs onto RabbitMQ. The exchange is durable and direct (routing key = tool
//! name); workers declare one durable quorum queue per tool and bind it
//! (`taskworker::topology`, shared by both sides), so a job for a tool that
//! no worker ever served is returned to us (mandatory flag) instead of being
//! dropped, and the outbox keeps it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection};
use taskstore_proto::broker;
use taskstore_proto::endpoint::ClientTls;
use taskstore_proto::jobs::{JobMessage, Topology};
use taskstore_telemetry::propagation::TRACEPARENT;
use taskworker::topology::declare_exchange;
use tracing::Instrument;

use super::fault::FaultyPublisher;
use super::relay::{Connect, Publisher};
use super::trace::{carried_context, publish_span};
use crate::settings::Fault;
use crate::store::execution::{JobPublisher, PublishError, Published};

/// AMQP delivery mode 2: the broker writes the message to disk.
const PERSISTENT: u8 = 2;
/// The relay holds its outbox rows locked while it waits for confirms; a
/// broker that stalls longer than this is treated as down.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// A confirmed publisher on one channel.
pub struct RabbitPublisher {
    connection: Connection,
    channel: Channel,
    exchange: String,
    topology: Topology,
    /// A channel of its own for looking at queues: a passive declare of a
    /// queue that does not exist closes its channel, which must not be the
    /// one that publishes.
    inspect: tokio::sync::Mutex<Option<Channel>>,
    /// The last wait for a confirmation ran out while the connection stayed
    /// up: the broker holds our publishes (a resource alarm blocks the
    /// connection, or it is overloaded). Cleared by the next confirmation.
    stalled: AtomicBool,
    /// The broker refused a job (nack). Seen after a cluster node was lost:
    /// a channel opened while the queue's leader moved kept refusing every
    /// publish, where a new channel did not; the relay then replaces this
    /// publisher (a new connection, a new channel).
    refused: AtomicBool,
}

impl std::fmt::Debug for RabbitPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitPublisher").finish_non_exhaustive()
    }
}

impl RabbitPublisher {
    pub async fn connect(
        url: &str,
        tls: &ClientTls,
        topology: &Topology,
    ) -> Result<Self, PublishError> {
        let connection = broker::connect(url, tls, "taskstore relay")
            .await
            .map_err(unavailable)?;
        let channel = connection.create_channel().await.map_err(unavailable)?;
        declare_exchange(&channel, topology)
            .await
            .map_err(unavailable)?;
        channel
            .confirm_select(ConfirmSelectOptions::default())
            .await
            .map_err(unavailable)?;
        Ok(Self {
            connection,
            channel,
            exchange: topology.exchange(),
            topology: topology.clone(),
            inspect: tokio::sync::Mutex::new(None),
            stalled: AtomicBool::new(false),
            refused: AtomicBool::new(false),
        })
    }

    /// How the relay connects (again, after a failure) to RabbitMQ at
    /// `url`, with the fault tests' crash point in front.
    pub fn connector(
        url: String,
        tls: ClientTls,
        topology: Topology,
        fault: Option<Fault>,
    ) -> Connect<FaultyPublisher<RabbitPublisher>> {
        std::sync::Arc::new(move || {
            let (url, tls, topology) = (url.clone(), tls.clone(), topology.clone());
            Box::pin(async move {
                let publisher = RabbitPublisher::connect(&url, &tls, &topology).await?;
                Ok(FaultyPublisher { publisher, fault })
            })
        })
    }

    /// Whether the connection and channel still work; a broken publisher is
    /// replaced by a new connection.
    pub fn is_connected(&self) -> bool {
        self.connection.status().connected()
            && self.channel.status().connected()
            && !self.refused.load(Ordering::Relaxed)
    }
}

fn blocked() -> PublishError {
    PublishError("the broker blocks publishers (a memory or disk alarm)".into())
}

/// How often a wait for confirmations looks whether the broker blocked us.
const BLOCKED_POLL: Duration = Duration::from_millis(100);

impl RabbitPublisher {
    /// A wait for a confirmation ran out: noted as a stall while the
    /// connection is still up (see `stalled`).
    fn no_confirmation(&self) -> PublishError {
        if self.is_connected() {
            self.stalled.store(true, Ordering::Relaxed);
        }
        PublishError("no confirmation from the broker in time".into())
    }

    /// Resolves once the broker has blocked this connection.
    async fn until_blocked(&self) {
        while !self.connection.status().blocked() {
            tokio::time::sleep(BLOCKED_POLL).await;
        }
    }
}

fn unavailable(err: lapin::Error) -> PublishError {
    PublishError(broker::describe(&err))
}

impl RabbitPublisher {
    /// Sends one job; the returned confirmation is awaited separately so
    /// that many can be in flight.
    async fn send(&self, job: &JobMessage) -> Result<lapin::PublisherConfirm, lapin::Error> {
        let span = publish_span(job, "rabbitmq", &self.exchange);
        let mut properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_content_type("application/json".into())
            .with_message_id(format!("{}/{}", job.task_id, job.generation).into());
        if let Some(context) = carried_context(&span, job) {
            let mut headers = FieldTable::default();
            headers.insert(TRACEPARENT.into(), AMQPValue::LongString(context.into()));
            properties = properties.with_headers(headers);
        }
        self.channel
            .basic_publish(
                self.exchange.as_str().into(),
                job.tool.as_str().into(),
                BasicPublishOptions {
                    mandatory: true,
                    ..BasicPublishOptions::default()
                },
                &job.to_bytes(),
                properties,
            )
            .instrument(span)
            .await
    }
}

/// What a confirmation says about one job.
impl RabbitPublisher {
    /// What a confirmation says about one job; a refusal marks this
    /// publisher for replacement (see `refused`).
    fn outcome(&self, confirmation: lapin::Confirmation) -> Result<Published, PublishError> {
        self.stalled.store(false, Ordering::Relaxed);
        if confirmation.is_nack() {
            self.refused.store(true, Ordering::Relaxed);
        }
        outcome(confirmation)
    }
}

fn outcome(confirmation: lapin::Confirmation) -> Result<Published, PublishError> {
    if confirmation.is_nack() {
        return Err(PublishError("the broker refused the job (nack)".into()));
    }
    match confirmation.take_message() {
        Some(_) => Ok(Published::NoWorkerForTool),
        None => Ok(Published::Queued),
    }
}

#[async_trait]
impl JobPublisher for RabbitPublisher {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        let confirm = async { self.send(job).await?.await };
        let confirmation = tokio::select! {
            confirmed = tokio::time::timeout(CONFIRM_TIMEOUT, confirm) => confirmed
                .map_err(|_| self.no_confirmation())?
                .map_err(unavailable)?,
            () = self.until_blocked() => return Err(blocked()),
        };
        self.outcome(confirmation)
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        // Send everything first, then collect the confirmations, which the
        // broker returns as it commits: one wait for the whole batch.
        let mut pending = Vec::with_capacity(jobs.len());
        for job in jobs {
            pending.push(self.send(job).await);
        }
        let deadline = tokio::time::Instant::now() + CONFIRM_TIMEOUT;
        let collect = async {
            let mut outcomes = Vec::with_capacity(jobs.len());
            for sent in pending {
                outcomes.push(match sent {
                    Ok(confirm) => match tokio::time::timeout_at(deadline, confirm).await {
                        Ok(Ok(confirmation)) => self.outcome(confirmation),
                        Ok(Err(err)) => Err(unavailable(err)),
                        Err(_) => Err(self.no_confirmation()),
                    },
                    Err(err) => Err(unavailable(err)),
                });
            }
            outcomes
        };
        // A blocked broker confirms nothing until its alarm clears: give the
        // batch back at once (its jobs stay in the outbox; any the broker
        // takes after all are delivered twice and fenced at claim).
        tokio::select! {
            outcomes = collect => outcomes,
            () = self.until_blocked() => jobs.iter().map(|_| Err(blocked())).collect(),
        }
    }

    /// The tool's queue's ready messages and consumers, from a passive
    /// declare. A queue that does not exist (no worker ever served the
    /// tool) counts as empty, without consumers: room for one, which the
    /// broker returns, so its task says it waits for a worker. A broker
    /// that cannot be asked: `None` (the publish will tell).
    async fn depth(&self, tool: &str) -> Option<crate::domain::QueueDepth> {
        let mut inspect = self.inspect.lock().await;
        if inspect
            .as_ref()
            .is_none_or(|channel| !channel.status().connected())
        {
            *inspect = self.connection.create_channel().await.ok();
        }
        let channel = inspect.as_ref()?;
        let queue = channel
            .queue_declare(
                self.topology.tool_queue(tool).as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..QueueDeclareOptions::default()
                },
                FieldTable::default(),
            )
            .await;
        match queue {
            Ok(queue) => Some(crate::domain::QueueDepth {
                ready: queue.message_count(),
                consumers: queue.consumer_count(),
            }),
            Err(_) => {
                *inspect = None;
                Some(crate::domain::QueueDepth {
                    ready: 0,
                    consumers: 0,
                })
            }
        }
    }
}

impl Publisher for RabbitPublisher {
    fn is_connected(&self) -> bool {
        RabbitPublisher::is_connected(self)
    }

    /// The broker sent `connection.blocked` (a memory or disk alarm: it
    /// reads nothing more from this connection until the alarm clears), or
    /// confirms nothing while the connection is up. The second covers a
    /// block lapin did not record: in one of our runs lapin 4.12 received
    /// the `connection.blocked` frame (its trace shows it) and the flag
    /// stayed unset; the relay then saw only publishes that were never
    /// confirmed.
    fn is_blocked(&self) -> bool {
        self.connection.status().blocked() || self.stalled.load(Ordering::Relaxed)
    }
}
