//! Workers for mcp-taskstore: take dispatched tasks from RabbitMQ, run them,
//! and report progress and results through the gRPC API.
//!
//! Write a tool by implementing [`Tool`]; serve tools with [`Worker`]:
//!
//! ```no_run
//! use std::sync::Arc;
//! use taskworker::{Tool, ToolContext, ToolError, Worker, WorkerConfig, text_result};
//!
//! struct Shout;
//!
//! #[async_trait::async_trait]
//! impl Tool for Shout {
//!     async fn call(&self, ctx: ToolContext, args: serde_json::Value) -> Result<serde_json::Value, ToolError> {
//!         ctx.progress("shouting").await;
//!         let text = args["text"].as_str().unwrap_or_default().to_uppercase();
//!         Ok(text_result(text))
//!     }
//! }
//!
//! # async fn run(config: WorkerConfig) -> Result<(), taskworker::WorkerError> {
//! let worker = Worker::new(config).with_tool("shout", Arc::new(Shout))?;
//! worker.run(tokio_util::sync::CancellationToken::new()).await
//! # }
//! ```
//!
//! The execution protocol (claims, leases, fencing, retries) is described in
//! `docs/execution.md`.

mod asking;
mod attempt;
mod claimant;
pub mod cli;
mod control;
mod delivery;
mod follow;
mod heartbeat;
mod metrics;
pub mod queue;
mod report;
mod runtime;
mod session;
pub mod signals;
mod source;
mod tool;
pub mod tools;
pub mod topology;

pub use asking::AskError;
pub use delivery::JobDelivery;
pub use runtime::{Worker, WorkerConfig, WorkerError};
pub use source::JobSource;
pub use tool::{
    ConcurrencyLimit, RateLimit, RetryPolicy, TaskSupport, Tool, ToolContext, ToolError, ToolInfo,
    error_result, is_error, text_result,
};
