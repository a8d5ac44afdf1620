//! The job messages that travel over RabbitMQ from the service's outbox relay
//! to workers. Shared here so that the publisher and every consumer agree.
//!
//! A message is only news: "task X of tenant T, dispatch generation G, wants
//! tool N". The worker claims the task through the TaskExecution API before
//! running it, so a stale or duplicated message never runs.

use serde::{Deserialize, Serialize};

/// The default prefix of every exchange and queue name.
pub const DEFAULT_PREFIX: &str = "taskstore";

/// The names on the broker. A prefix keeps deployments (or test runs) that
/// share one broker apart; the service and its workers must agree on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    prefix: String,
    queue_type: QueueType,
}

/// What kind of queue holds a tool's jobs. Every worker of a deployment must
/// declare the same kind: RabbitMQ refuses to redeclare a queue as another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum QueueType {
    /// Replicated (Raft) across the broker's nodes: a job survives the loss
    /// of a node. The default: it loses nothing.
    #[default]
    Quorum,
    /// One node's queue (version 2 storage), persistent messages: a job
    /// survives a broker restart, but not the loss of that node's disk, and
    /// the queue is unavailable while its node is down.
    Classic,
}

impl QueueType {
    pub fn parse(raw: &str) -> Result<Self, String> {
        match raw {
            "quorum" => Ok(Self::Quorum),
            "classic" => Ok(Self::Classic),
            other => Err(format!("unknown queue type {other:?}: quorum or classic")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Quorum => "quorum",
            Self::Classic => "classic",
        }
    }
}

impl Default for Topology {
    fn default() -> Self {
        Self {
            prefix: DEFAULT_PREFIX.to_owned(),
            queue_type: QueueType::default(),
        }
    }
}

impl Topology {
    /// `prefix` follows the tool name rules.
    pub fn new(prefix: &str) -> Option<Self> {
        is_valid_tool_name(prefix).then(|| Self {
            prefix: prefix.to_owned(),
            queue_type: QueueType::default(),
        })
    }

    /// The same names, with tool queues of `queue_type`.
    pub fn with_queue_type(self, queue_type: QueueType) -> Self {
        Self { queue_type, ..self }
    }

    pub fn queue_type(&self) -> QueueType {
        self.queue_type
    }

    /// The durable direct exchange jobs are published to, routed by tool.
    pub fn exchange(&self) -> String {
        format!("{}.jobs", self.prefix)
    }

    /// The durable queue that holds the jobs of one tool. Every
    /// worker that serves the tool consumes from it, so they share the work.
    pub fn tool_queue(&self, tool: &str) -> String {
        format!("{}{tool}", self.tool_queue_prefix())
    }

    /// What every tool queue's name starts with.
    pub fn tool_queue_prefix(&self) -> String {
        format!("{}.tool.", self.prefix)
    }

    /// The arguments every tool queue is declared with: the one place they
    /// are written (workers in every language learn them from Heartbeat).
    pub fn queue_arguments(&self) -> Vec<(&'static str, QueueArgument)> {
        let mut arguments = vec![(
            "x-queue-type",
            QueueArgument::Text(self.queue_type.as_str()),
        )];
        if self.queue_type == QueueType::Classic {
            // Version 2 storage: fewer writes per message than version 1.
            arguments.push(("x-queue-version", QueueArgument::Integer(2)));
        }
        arguments
    }

    /// The topology as Heartbeat tells it to workers.
    pub fn to_pb(&self) -> crate::v1::QueueTopology {
        use crate::v1::queue_argument::Value;
        crate::v1::QueueTopology {
            exchange: self.exchange(),
            tool_queue_prefix: self.tool_queue_prefix(),
            queue_arguments: self
                .queue_arguments()
                .into_iter()
                .map(|(name, value)| crate::v1::QueueArgument {
                    name: name.to_owned(),
                    value: Some(match value {
                        QueueArgument::Text(text) => Value::Text(text.to_owned()),
                        QueueArgument::Integer(n) => Value::Integer(n),
                    }),
                })
                .collect(),
        }
    }
}

/// A queue argument's value, with its AMQP type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueArgument {
    /// A long string.
    Text(&'static str),
    /// A long (32-bit) integer.
    Integer(i32),
}

/// Tool names as MCP allows them (and as AMQP routing keys carry them).
pub fn is_valid_tool_name(tool: &str) -> bool {
    (1..=128).contains(&tool.len())
        && tool
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'))
}

/// One job: run `tool` for the task, at this dispatch generation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JobMessage {
    pub tenant_id: String,
    pub task_id: String,
    pub generation: u64,
    pub tool: String,
    /// The trace the task was created in (W3C `traceparent`). Not part of
    /// the message body: it travels in the message's headers (AMQP) or
    /// beside it (the in-process queue).
    #[serde(skip)]
    pub trace_context: Option<String>,
}

impl JobMessage {
    pub fn to_bytes(&self) -> Vec<u8> {
        // A struct of strings and an integer always serializes.
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_garbage() {
        let job = JobMessage {
            tenant_id: "default".into(),
            task_id: "t/1".into(),
            generation: 3,
            tool: "echo".into(),
            trace_context: None,
        };
        assert_eq!(JobMessage::from_bytes(&job.to_bytes()).ok(), Some(job));
        assert!(JobMessage::from_bytes(b"{").is_err());
    }

    #[test]
    fn topology_names() {
        let topology = Topology::default();
        assert_eq!(topology.exchange(), "taskstore.jobs");
        assert_eq!(topology.tool_queue("echo"), "taskstore.tool.echo");
        assert_eq!(
            Topology::new("ci-7").map(|t| t.exchange()),
            Some("ci-7.jobs".into())
        );
        assert!(Topology::new("bad prefix").is_none());
    }

    #[test]
    fn tool_names() {
        assert!(is_valid_tool_name("echo"));
        assert!(is_valid_tool_name("files/read-v2.1_x"));
        for bad in ["", "a b", "é", "a*", &"x".repeat(129)] {
            assert!(!is_valid_tool_name(bad), "{bad:?}");
        }
    }
}
