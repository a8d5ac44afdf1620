//! The `mcp.tasks.v1` gRPC services over any backend (`TaskStore`,
//! `TaskExecution`, `Operations`), and clients that implement the same
//! traits ([`GrpcTaskStore`], [`GrpcExecutionStore`]).
//!
//! Requests are parsed into domain types at the edge ([`parse`]); domain
//! errors become `tonic::Status` in one exhaustive place ([`status`]).

mod attempt_watch;
mod authenticate;
mod caller;
mod client;
mod client_task_store;
mod convert;
mod execution;
mod execution_client;
mod message_size;
mod observe;
mod operations;
mod parse;
mod service;
mod status;
mod task_execution;

/// The input limits live in `domain` (every edge applies them); named
/// here too, where gRPC callers have always found them.
pub use crate::domain::InputLimits;
pub use authenticate::Authenticate;
pub use caller::TENANT_METADATA;
pub use client::{ConnectError, GrpcTaskStore};
pub use execution::TaskExecutionService;
pub use execution_client::GrpcExecutionStore;
pub use message_size::OversizeIsResourceExhausted;
pub use observe::{IncomingTraceparent, ObserveRpcs};
pub use operations::{OperationsService, ServiceFacts};
pub use service::TaskStoreService;
pub use status::store_error_from_status;
pub use taskstore_proto::v1 as pb;
