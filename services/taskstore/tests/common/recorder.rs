//! A publisher that records what it is given: the job queue, as the relay
//! sees it, without a broker.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use taskstore::store::execution::{JobPublisher, PublishError, Published, publish_each};
use taskstore_proto::jobs::JobMessage;

#[derive(Default)]
pub struct Recorder {
    pub jobs: Mutex<Vec<JobMessage>>,
    /// Whether a worker's queue takes the jobs (else they are returned).
    pub routable: bool,
    /// Whether the broker refuses everything.
    pub down: bool,
    /// How many more jobs of a tool the queue takes each time it is asked
    /// (`None`: everything at once).
    pub room: Option<u32>,
}

#[async_trait]
impl JobPublisher for Recorder {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        if self.down {
            return Err(PublishError("broker down".into()));
        }
        self.jobs.lock().expect("lock").push(job.clone());
        Ok(if self.routable {
            Published::Queued
        } else {
            Published::NoWorkerForTool
        })
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }

    async fn room(&self, _tool: &str) -> Option<u32> {
        self.room
    }
}

/// A shared recorder that the relay loop can (re)connect to.
#[derive(Clone, Default)]
pub struct SharedRecorder(pub Arc<Recorder>);

impl SharedRecorder {
    /// A queue that takes every job (a worker serves every tool).
    pub fn routable() -> Self {
        Self(Arc::new(Recorder {
            routable: true,
            ..Recorder::default()
        }))
    }

    /// What the relay loop calls for a connection: this recorder, every time.
    pub fn connect(&self) -> taskstore::dispatch::relay::Connect<SharedRecorder> {
        let queue = self.clone();
        Arc::new(move || {
            let queue = queue.clone();
            Box::pin(async move { Ok(queue) })
        })
    }
}

#[async_trait]
impl JobPublisher for SharedRecorder {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        self.0.publish(job).await
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }

    async fn room(&self, tool: &str) -> Option<u32> {
        self.0.room(tool).await
    }
}

impl taskstore::dispatch::relay::Publisher for SharedRecorder {
    fn is_connected(&self) -> bool {
        true
    }
}
