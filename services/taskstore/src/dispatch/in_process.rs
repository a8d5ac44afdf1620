//! The in-process job queue as a publisher, for `taskstore dev` (or
//! `--amqp-url none`): jobs go straight to the embedded workers' queues.

use async_trait::async_trait;
use taskstore_proto::jobs::JobMessage;
use taskworker::queue::InProcessQueue;

use super::trace::{carried_context, publish_span};
use crate::store::execution::{JobPublisher, PublishError, Published, publish_each};

/// Publishes to an [`InProcessQueue`].
#[derive(Debug, Clone)]
pub struct InProcessPublisher(pub InProcessQueue);

#[async_trait]
impl JobPublisher for InProcessPublisher {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        let span = publish_span(job, "in-process", &job.tool);
        let context = carried_context(&span, job);
        let _entered = span.enter();
        Ok(if self.0.publish(&job.tool, job.to_bytes(), context) {
            Published::Queued
        } else {
            Published::NoWorkerForTool
        })
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }

    /// A tool nobody serves has no consumers: room for one, which the
    /// queue refuses, so its task says it waits for a worker.
    async fn depth(&self, tool: &str) -> Option<crate::domain::QueueDepth> {
        let (ready, consumers) = self.0.depth(tool).unwrap_or((0, 0));
        Some(crate::domain::QueueDepth {
            ready: u32::try_from(ready).unwrap_or(u32::MAX),
            consumers: u32::try_from(consumers).unwrap_or(u32::MAX),
        })
    }
}

impl InProcessPublisher {
    /// The relay's connector: the queue is always there.
    pub fn connector(queue: InProcessQueue) -> super::relay::Connect<InProcessPublisher> {
        let publisher = InProcessPublisher(queue);
        std::sync::Arc::new(move || {
            let publisher = publisher.clone();
            Box::pin(async move { Ok(publisher) })
        })
    }
}

impl super::relay::Publisher for InProcessPublisher {
    fn is_connected(&self) -> bool {
        true
    }
}
