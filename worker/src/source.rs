//! Where a worker's jobs come from: one RabbitMQ consumer per tool, or the
//! in-process queue's consumers. Either way the deliveries arrive on one
//! channel, each tagged with the tool whose queue it came from.

use std::future::Future;
use std::pin::Pin;

use lapin::options::{BasicConsumeOptions, BasicQosOptions};
use lapin::types::FieldTable;
use lapin::{Channel, Connection};
use taskstore_proto::broker;
use taskstore_proto::endpoint::ClientTls;
use taskstore_proto::jobs::Topology;
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::delivery::JobDelivery;
use crate::queue::{InProcessConsumer, InProcessQueue};
use crate::topology::declare_tool_queue;

/// Where a worker takes its jobs from.
#[derive(Debug, Clone)]
pub enum JobSource {
    /// RabbitMQ, with the broker names shared with the service.
    RabbitMq {
        url: String,
        /// TLS to an `amqps://` broker.
        tls: ClientTls,
        topology: Topology,
    },
    /// The queue of the process the worker is embedded in.
    InProcess(InProcessQueue),
}

impl JobSource {
    /// The broker names it consumes under, when it is a broker.
    pub(crate) fn topology(&self) -> Option<&Topology> {
        match self {
            JobSource::RabbitMq { topology, .. } => Some(topology),
            JobSource::InProcess(_) => None,
        }
    }

    /// The messaging system and the queue name of `tool`'s jobs (for spans).
    pub(crate) fn describe(&self, tool: &str) -> (&'static str, String) {
        match self {
            JobSource::RabbitMq { topology, .. } => ("rabbitmq", topology.tool_queue(tool)),
            JobSource::InProcess(_) => ("in-process", tool.to_owned()),
        }
    }
}

/// A delivered job and the tool whose queue it came from.
pub(crate) type Incoming = (String, Box<dyn JobDelivery>);

/// Why a connection to the job queue ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum QueueLost {
    #[error("{}", taskstore_proto::broker::describe(.0))]
    Amqp(#[from] lapin::Error),
    #[error("the job queue stopped delivering (connection lost)")]
    ConsumersEnded,
}

/// Deliveries flowing from an open source.
pub(crate) struct Feed {
    pub(crate) incoming: mpsc::Receiver<Incoming>,
    /// The broker connection and its channels, closed when the feed is:
    /// unacknowledged deliveries then go back to their queues.
    broker: Option<(Connection, Vec<Channel>)>,
}

impl Feed {
    /// Starts consuming the queues of `tools`, at most `prefetch`
    /// unacknowledged deliveries per tool.
    pub(crate) async fn open(
        source: &JobSource,
        tools: &[String],
        prefetch: usize,
        worker_id: &str,
        shutdown: &CancellationToken,
    ) -> Result<Self, QueueLost> {
        let (deliveries, incoming) = mpsc::channel::<Incoming>(prefetch.max(1));
        let broker = match source {
            JobSource::RabbitMq { url, tls, topology } => {
                let connection =
                    broker::connect(url, tls, &format!("taskworker {worker_id}")).await?;
                let prefetch = u16::try_from(prefetch).unwrap_or(u16::MAX).max(1);
                let mut channels = Vec::new();
                for tool in tools {
                    let channel = connection.create_channel().await?;
                    channel
                        .basic_qos(prefetch, BasicQosOptions::default())
                        .await?;
                    let queue = declare_tool_queue(&channel, topology, tool).await?;
                    let tag = format!("{worker_id}/{tool}");
                    let consumer = channel
                        .basic_consume(
                            queue.as_str().into(),
                            tag.as_str().into(),
                            BasicConsumeOptions::default(),
                            FieldTable::default(),
                        )
                        .await?;
                    forward(consumer, tool.clone(), deliveries.clone(), shutdown.clone());
                    channels.push(channel);
                }
                tracing::info!("consuming jobs from RabbitMQ");
                Some((connection, channels))
            }
            JobSource::InProcess(queue) => {
                for tool in tools {
                    let consumer = queue.consumer(tool);
                    forward(consumer, tool.clone(), deliveries.clone(), shutdown.clone());
                }
                tracing::info!("consuming jobs from the in-process queue");
                None
            }
        };
        Ok(Self { incoming, broker })
    }

    pub(crate) async fn close(self) {
        if let Some((connection, channels)) = self.broker {
            for channel in channels {
                let _ = channel.close(200, "worker stopping".into()).await;
            }
            let _ = connection.close(200, "worker stopping".into()).await;
        }
    }
}

/// The next delivery of a consumer, or `None` once its queue is gone.
type NextDelivery<'a> = Pin<Box<dyn Future<Output = Option<Box<dyn JobDelivery>>> + Send + 'a>>;

/// A consumer of one tool's queue: the next delivery, or `None` once the
/// queue is gone (the connection closed).
trait Consumer: Send + 'static {
    fn next_delivery(&mut self) -> NextDelivery<'_>;
}

impl Consumer for lapin::Consumer {
    fn next_delivery(&mut self) -> NextDelivery<'_> {
        Box::pin(async move {
            // An error ends the consumer: the connection is gone.
            let delivery = StreamExt::next(self).await?.ok()?;
            Some(Box::new(delivery) as Box<dyn JobDelivery>)
        })
    }
}

impl Consumer for InProcessConsumer {
    fn next_delivery(&mut self) -> NextDelivery<'_> {
        Box::pin(async move {
            let delivery = self.next().await?;
            Some(Box::new(delivery) as Box<dyn JobDelivery>)
        })
    }
}

/// Moves a consumer's deliveries, tagged with `tool`, onto `deliveries`
/// until it ends, the receiver is gone, or `shutdown` fires.
fn forward(
    mut consumer: impl Consumer,
    tool: String,
    deliveries: mpsc::Sender<Incoming>,
    shutdown: CancellationToken,
) {
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = shutdown.cancelled() => return,
                next = consumer.next_delivery() => next,
            };
            let Some(delivery) = next else { return };
            if deliveries.send((tool.clone(), delivery)).await.is_err() {
                return;
            }
        }
    });
}
