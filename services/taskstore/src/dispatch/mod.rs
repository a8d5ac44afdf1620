//! Dispatch: getting jobs from the outbox to workers, and getting tasks whose
//! worker died back into the queue. See `docs/execution.md`.
//!
//! - [`rabbitmq`]: the [`JobPublisher`](crate::store::execution::JobPublisher)
//!   on RabbitMQ (publisher confirms, persistent messages, mandatory routing).
//! - [`in_process`]: the publisher of `dev`'s in-process queue.
//! - [`fault`]: the crash point the fault tests put in front of a publisher.
//! - [`relay`]: the loop that drains the outbox into the queue.
//!
//! The lease reaper is one of the periodic chores (`periodic`).

pub mod fault;
pub mod in_process;
pub mod rabbitmq;
pub mod relay;
mod trace;
