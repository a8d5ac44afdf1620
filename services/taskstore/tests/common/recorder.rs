//! A publisher that records what it is given: the job queue, as the relay
//! sees it, without a broker.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use taskstore::domain::QueueDepth;
use taskstore::store::execution::{JobPublisher, PublishError, Published, publish_each};
use taskstore_proto::jobs::JobMessage;

#[derive(Default)]
pub struct Recorder {
    pub jobs: Mutex<Vec<JobMessage>>,
    /// Whether a worker's queue takes the jobs (else they are returned).
    pub routable: bool,
    /// Whether the broker refuses everything.
    pub down: bool,
    /// What the queue says it holds of every tool (`None`: it cannot
    /// tell, and takes everything at once).
    pub depth: Option<QueueDepth>,
}

impl Recorder {
    /// A queue that takes every job, and has room for `room` more of a
    /// backlog each time it is asked (one job already waits in it, so new
    /// jobs never go straight in).
    pub fn with_room(room: u32) -> Self {
        Self {
            routable: true,
            depth: Some(QueueDepth {
                ready: 1,
                consumers: room + 1,
            }),
            ..Self::default()
        }
    }
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

    async fn depth(&self, _tool: &str) -> Option<QueueDepth> {
        self.depth
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

    async fn depth(&self, tool: &str) -> Option<QueueDepth> {
        self.0.depth(tool).await
    }
}

impl taskstore::dispatch::relay::Publisher for SharedRecorder {
    fn is_connected(&self) -> bool {
        true
    }
}
