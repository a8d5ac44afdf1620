//! Dispatch: getting jobs from the outbox to workers, and getting tasks whose
//! worker died back into the queue. See `docs/execution.md`.
//!
//! - [`rabbitmq`]: the [`JobPublisher`](crate::store::execution::JobPublisher)
//!   on RabbitMQ (publisher confirms, persistent messages, mandatory routing).
//! - [`relay`]: the loop that drains the outbox into the queue.
//! - [`reaper`]: the loop that re-dispatches tasks whose lease expired.

pub mod in_process;
pub mod rabbitmq;
pub mod reaper;
pub mod relay;
