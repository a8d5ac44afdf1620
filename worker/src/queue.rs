//! The in-process job queue: stands in for RabbitMQ when the service and
//! its workers share one process (`taskstore dev`). A tool's queue exists
//! once a worker serves it; jobs for a tool nobody serves are refused, so
//! the store's outbox keeps them, as with RabbitMQ's mandatory flag.
//! Nothing here is durable: the store's outbox and leases are what make the
//! embedded mode lose nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use tokio::sync::mpsc;

use crate::delivery::JobDelivery;

/// A queued job: its bytes and the trace context it carries.
type Queued = (Vec<u8>, Option<String>);

type Receiver = Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Queued>>>;

#[derive(Debug, Clone)]
struct ToolQueue {
    sender: mpsc::UnboundedSender<Queued>,
    receiver: Receiver,
    /// Jobs queued and not yet taken by a consumer.
    waiting: Arc<AtomicUsize>,
    /// Consumers made for the tool.
    consumers: Arc<AtomicUsize>,
}

impl ToolQueue {
    fn send(&self, queued: Queued) -> bool {
        let sent = self.sender.send(queued).is_ok();
        if sent {
            self.waiting.fetch_add(1, Ordering::Relaxed);
        }
        sent
    }
}

/// Per-tool queues shared by the publisher and the workers of one process.
#[derive(Debug, Clone, Default)]
pub struct InProcessQueue {
    queues: Arc<Mutex<HashMap<String, ToolQueue>>>,
}

impl InProcessQueue {
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a job (with the trace context it carries, as AMQP headers
    /// would); `false` when no worker serves `tool`.
    pub fn publish(&self, tool: &str, job: Vec<u8>, trace_context: Option<String>) -> bool {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues
            .get(tool)
            .is_some_and(|queue| queue.send((job, trace_context)))
    }

    /// What `tool`'s queue holds, as a broker would say: the jobs waiting
    /// for a consumer, and the consumers. `None` when nobody serves the
    /// tool.
    pub fn depth(&self, tool: &str) -> Option<(usize, usize)> {
        let queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        queues.get(tool).map(|queue| {
            (
                queue.waiting.load(Ordering::Relaxed),
                queue.consumers.load(Ordering::Relaxed),
            )
        })
    }

    /// The consumer side of `tool`'s queue (declared on first use). Several
    /// consumers of one tool share its jobs.
    pub fn consumer(&self, tool: &str) -> InProcessConsumer {
        let mut queues = self.queues.lock().unwrap_or_else(PoisonError::into_inner);
        let queue = queues.entry(tool.to_owned()).or_insert_with(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            ToolQueue {
                sender,
                receiver: Arc::new(tokio::sync::Mutex::new(receiver)),
                waiting: Arc::default(),
                consumers: Arc::default(),
            }
        });
        queue.consumers.fetch_add(1, Ordering::Relaxed);
        InProcessConsumer {
            queue: queue.clone(),
        }
    }
}

/// Takes jobs of one tool.
#[derive(Debug, Clone)]
pub struct InProcessConsumer {
    queue: ToolQueue,
}

impl InProcessConsumer {
    /// The next job; waits until there is one.
    pub async fn next(&self) -> Option<InProcessDelivery> {
        let (data, trace_context) = self.queue.receiver.lock().await.recv().await?;
        self.queue.waiting.fetch_sub(1, Ordering::Relaxed);
        Some(InProcessDelivery {
            data,
            trace_context,
            requeue_to: self.queue.clone(),
        })
    }
}

/// A job taken from an [`InProcessQueue`].
#[derive(Debug)]
pub struct InProcessDelivery {
    data: Vec<u8>,
    trace_context: Option<String>,
    requeue_to: ToolQueue,
}

#[async_trait]
impl JobDelivery for InProcessDelivery {
    fn data(&self) -> &[u8] {
        &self.data
    }

    fn trace_context(&self) -> Option<String> {
        self.trace_context.clone()
    }

    async fn ack(self: Box<Self>) {}

    async fn requeue(self: Box<Self>) {
        // The queue lives as long as any consumer: a failed send means the
        // process is stopping, and the store's outbox or lease recovers it.
        let _ = self.requeue_to.send((self.data, self.trace_context));
    }

    async fn reject(self: Box<Self>) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn jobs_reach_only_served_tools_and_requeue() {
        let queue = InProcessQueue::new();
        assert!(
            !queue.publish("echo", b"early".to_vec(), None),
            "nobody serves echo yet"
        );
        assert_eq!(queue.depth("echo"), None, "nobody serves echo yet");
        let first = queue.consumer("echo");
        let second = queue.consumer("echo");
        assert_eq!(queue.depth("echo"), Some((0, 2)), "two consumers");
        assert!(queue.publish("echo", b"one".to_vec(), Some("trace".into())));
        assert_eq!(queue.depth("echo"), Some((1, 2)));
        assert!(queue.publish("echo", b"two".to_vec(), None));
        assert_eq!(queue.depth("echo"), Some((2, 2)));
        let one = first.next().await.expect("a job");
        assert_eq!(one.data(), b"one");
        assert_eq!(one.trace_context().as_deref(), Some("trace"));
        assert_eq!(
            queue.depth("echo"),
            Some((1, 2)),
            "a taken job waits no more"
        );
        Box::new(one).requeue().await;
        assert_eq!(
            queue.depth("echo"),
            Some((2, 2)),
            "a requeued job waits again"
        );
        assert_eq!(second.next().await.expect("a job").data(), b"two");
        assert_eq!(
            second.next().await.expect("the requeued job").data(),
            b"one"
        );
    }
}
