//! The RabbitMQ topology, declared in one place for both sides: the
//! service's relay declares the exchange it publishes to, workers declare
//! the exchange and the queue of each tool they serve. Declaring is
//! idempotent, so whichever starts first creates them, and they can never
//! disagree on names or arguments.

use lapin::Channel;
use lapin::ExchangeKind;
use lapin::options::{ExchangeDeclareOptions, QueueBindOptions, QueueDeclareOptions};
use lapin::types::{AMQPValue, FieldTable};
use taskstore_proto::jobs::{QueueArgument, Topology};

/// The durable direct exchange jobs are published to, routed by tool name.
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

/// The durable queue of `tool`, bound to the exchange (declared too);
/// returns the queue's name. Quorum queues (the default) keep a job through
/// the loss of a broker node; classic ones only through a restart (see
/// [`QueueType`]). Every worker of the tool consumes from the one queue, so
/// they share the work.
pub async fn declare_tool_queue(
    channel: &Channel,
    topology: &Topology,
    tool: &str,
) -> Result<String, lapin::Error> {
    declare_exchange(channel, topology).await?;
    let queue = topology.tool_queue(tool);
    let mut arguments = FieldTable::default();
    for (name, value) in topology.queue_arguments() {
        let value = match value {
            QueueArgument::Text(text) => AMQPValue::LongString(text.into()),
            QueueArgument::Integer(n) => AMQPValue::LongInt(n),
        };
        arguments.insert(name.into(), value);
    }
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
            topology.exchange().as_str().into(),
            tool.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await?;
    Ok(queue)
}
