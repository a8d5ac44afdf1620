//! The `mcp.tasks.v1.TaskStore` gRPC service over any [`crate::TaskStore`],
//! and [`GrpcTaskStore`], a client that implements the same trait.
//!
//! Requests are parsed into domain types at the edge ([`parse`]); domain
//! errors become `tonic::Status` in one exhaustive place ([`status`]).

mod client;
mod convert;
mod execution;
mod limits;
mod message_size;
mod parse;
mod service;
mod status;

pub use client::GrpcTaskStore;
pub use execution::TaskExecutionService;
pub use limits::InputLimits;
pub use message_size::OversizeIsResourceExhausted;
pub use service::TaskStoreService;
pub use status::store_error_from_status;
pub use taskstore_proto::v1 as pb;
