//! The MCP endpoint (`/mcp`, Streamable HTTP): the worker fleet's tools as
//! durable MCP tasks, for clients of both task revisions of the spec
//! (2025-11-25 core tasks, 2026-07-28 tasks extension; `domain::mcp` holds
//! where they differ).
//!
//! Stateless by design: every request is authenticated, scoped and answered
//! from the store, so any replica answers for any task and a restarted
//! gateway forgets nothing. The 2025-11-25 session id is issued at
//! `initialize` and only scopes tasks (it is not remembered); the 2026-07-28
//! revision has no sessions.
//!
//! - [`gateway`]: what every request shares; [`server`]: serving it;
//! - [`http`]: the HTTP edge (origin, credentials, body, revision,
//!   session), giving a [`call`] context; [`headers`]: the 2026-07-28
//!   standard headers checked against the body;
//! - [`jsonrpc`]: messages and error codes;
//! - [`methods`]: which method does what, per revision;
//! - [`tools`], [`tasks`]: the methods over the store (the fleet's tools
//!   from `edge::ToolCatalog`); [`waiting`]: waiting for a
//!   task to end; [`in_flight`]: the synchronous calls running here;
//! - [`shapes`]: tasks and tools as each revision writes them;
//! - [`errors`]: store and admission errors as JSON-RPC errors, in one place.

mod admit;
mod asking;
mod call;
mod errors;
mod gateway;
mod headers;
mod http;
mod in_flight;
pub mod jsonrpc;
mod listen;
mod methods;
mod reply;
mod request;
mod result_streams;
mod resume;
mod server;
mod shapes;
mod sse;
mod streams;
mod subscriptions;
mod tasks;
mod tools;
mod waiting;

pub use gateway::{GatewayParts, McpSettings, TASKS_EXTENSION};
pub use server::McpGateway;
