//! Jobs onto RabbitMQ. The exchange is durable and direct (routing key = tool
//! name); workers declare one durable quorum queue per tool and bind it, so
//! a job for a tool that no worker ever served is returned to us (mandatory
//! flag) instead of being dropped, and the outbox keeps it.

use std::time::Duration;

use async_trait::async_trait;
use lapin::options::{BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions};
use lapin::types::FieldTable;
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, ExchangeKind};
use taskstore_proto::jobs::{JobMessage, Topology};

use crate::store::execution::{JobPublisher, PublishError, Published};

/// AMQP delivery mode 2: the broker writes the message to disk.
const PERSISTENT: u8 = 2;
/// The relay holds its outbox rows locked while it waits for confirms; a
/// broker that stalls longer than this is treated as down.
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);

/// Declares the jobs exchange on `channel` (idempotent; the service and
/// workers both do it, whichever starts first).
pub async fn declare_exchange(channel: &Channel, topology: &Topology) -> Result<(), lapin::Error> {
    channel
        .exchange_declare(
            topology.exchange().as_str().into(),
            ExchangeKind::Direct,
            ExchangeDeclareOptions {
                durable: true,
                ..ExchangeDeclareOptions::default()
            },
            FieldTable::default(),
        )
        .await
}

/// A confirmed publisher on one channel.
pub struct RabbitPublisher {
    connection: Connection,
    channel: Channel,
    exchange: String,
}

impl std::fmt::Debug for RabbitPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RabbitPublisher").finish_non_exhaustive()
    }
}

impl RabbitPublisher {
    pub async fn connect(url: &str, topology: &Topology) -> Result<Self, PublishError> {
        let connection = Connection::connect(url, ConnectionProperties::default())
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
        })
    }

    /// Whether the connection and channel still work; a broken publisher is
    /// replaced by a new connection.
    pub fn is_connected(&self) -> bool {
        self.connection.status().connected() && self.channel.status().connected()
    }
}

fn unavailable(err: lapin::Error) -> PublishError {
    PublishError(err.to_string())
}

#[async_trait]
impl JobPublisher for RabbitPublisher {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        let properties = BasicProperties::default()
            .with_delivery_mode(PERSISTENT)
            .with_content_type("application/json".into())
            .with_message_id(format!("{}/{}", job.task_id, job.generation).into());
        let publish = async {
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
                .await?
                .await
        };
        let confirmation = tokio::time::timeout(CONFIRM_TIMEOUT, publish)
            .await
            .map_err(|_| PublishError("no confirmation from the broker in time".into()))?
            .map_err(unavailable)?;
        if confirmation.is_nack() {
            return Err(PublishError("the broker refused the job (nack)".into()));
        }
        match confirmation.take_message() {
            Some(_) => Ok(Published::NoWorkerForTool),
            None => Ok(Published::Queued),
        }
    }
}
