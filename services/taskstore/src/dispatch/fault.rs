//! The fault tests' crash point, in front of the publisher it fakes a crash
//! of: with `Fault::CrashBeforePublish` the process aborts when the relay is
//! about to publish, after the task and its job were committed.

use async_trait::async_trait;
use taskstore_proto::jobs::JobMessage;

use super::relay::Publisher;
use crate::settings::Fault;
use crate::store::execution::{JobPublisher, PublishError, Published};

/// `P`, with the crash point in front.
#[derive(Debug)]
pub struct FaultyPublisher<P> {
    pub publisher: P,
    pub fault: Option<Fault>,
}

impl<P> FaultyPublisher<P> {
    fn crash_if_asked(&self, jobs: &[JobMessage]) {
        if let (Some(Fault::CrashBeforePublish), Some(job)) = (self.fault, jobs.first()) {
            tracing::error!(task_id = %job.task_id, "fault injection: crashing before publishing a committed job");
            std::process::abort();
        }
    }
}

#[async_trait]
impl<P: JobPublisher> JobPublisher for FaultyPublisher<P> {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        self.crash_if_asked(std::slice::from_ref(job));
        self.publisher.publish(job).await
    }

    // The relay's path: forwarded as a batch, so a pipelining publisher
    // keeps its one round trip per batch.
    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        self.crash_if_asked(jobs);
        self.publisher.publish_all(jobs).await
    }

    async fn depth(&self, tool: &str) -> Option<crate::domain::QueueDepth> {
        self.publisher.depth(tool).await
    }
}

impl<P: Publisher> Publisher for FaultyPublisher<P> {
    fn is_connected(&self) -> bool {
        self.publisher.is_connected()
    }

    fn is_blocked(&self) -> bool {
        self.publisher.is_blocked()
    }
}
