//! One delivered job, whichever queue it came from.

use async_trait::async_trait;
use lapin::options::{BasicAckOptions, BasicNackOptions, BasicRejectOptions};
use lapin::types::AMQPValue;
use taskstore_telemetry::propagation::TRACEPARENT;

/// A job as a queue delivered it, with the queue's acknowledgements.
#[async_trait]
pub trait JobDelivery: Send + 'static {
    /// The job message's bytes.
    fn data(&self) -> &[u8];
    /// The trace context the job carries (W3C `traceparent`), if any.
    fn trace_context(&self) -> Option<String>;
    /// Done with it: the task was claimed, or the job is stale.
    async fn ack(self: Box<Self>);
    /// Back to the queue, for this or another worker.
    async fn requeue(self: Box<Self>);
    /// Dropped for good: the message is malformed.
    async fn reject(self: Box<Self>);
}

/// Acknowledgement failures are not worth more than a log line: an
/// unacknowledged delivery is redelivered, and the claim protocol makes a
/// redelivery harmless.
#[async_trait]
impl JobDelivery for lapin::message::Delivery {
    fn data(&self) -> &[u8] {
        &self.data
    }

    fn trace_context(&self) -> Option<String> {
        let headers = self.properties.headers().as_ref()?;
        match headers.inner().get(TRACEPARENT)? {
            AMQPValue::LongString(value) => Some(value.to_string()),
            _ => None,
        }
    }

    async fn ack(self: Box<Self>) {
        if let Err(err) = std::ops::Deref::deref(&*self)
            .ack(BasicAckOptions::default())
            .await
        {
            tracing::debug!(error = %err, "ack failed; the job will be redelivered and refused");
        }
    }

    async fn requeue(self: Box<Self>) {
        let options = BasicNackOptions {
            requeue: true,
            ..BasicNackOptions::default()
        };
        if let Err(err) = std::ops::Deref::deref(&*self).nack(options).await {
            tracing::debug!(error = %err, "requeue failed; the broker redelivers on reconnect");
        }
    }

    async fn reject(self: Box<Self>) {
        if let Err(err) = std::ops::Deref::deref(&*self)
            .reject(BasicRejectOptions { requeue: false })
            .await
        {
            tracing::debug!(error = %err, "reject failed");
        }
    }
}
