//! mcp-taskstore: a durable backend for long-running MCP tasks.
//!
//! - [`domain`]: what a task is; raw input becomes these types at the edge.
//! - [`store`]: the [`store::TaskStore`] trait and its backends.
//! - [`grpc`]: the `mcp.tasks.v1` service over any store, and a client that is
//!   itself a store.
//! - [`mcp`]: the MCP endpoint (`/mcp`); [`dashboard`]: the web dashboard;
//!   [`edge`]: what every edge shares.
//! - [`server`]: binding, health, reflection and graceful shutdown.
//! - [`config`], [`cli`], [`telemetry`], [`sweeper`]: the `taskstore` binary.

pub mod auth;
pub mod bench;
pub mod cli;
pub mod config;
pub mod dashboard;
pub mod dispatch;
pub mod domain;
pub mod durations;
pub mod edge;
pub mod error;
pub mod grpc;
pub mod health;
pub mod mcp;
pub mod metrics;
pub mod periodic;
pub mod server;
pub mod settings;
pub mod startup;
pub mod store;

pub use error::StoreError;
pub use store::TaskStore;
