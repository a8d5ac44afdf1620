//! The public gRPC contract of mcp-taskstore: package `mcp.tasks.v1`.
//!
//! The `.proto` files under `proto/mcp/` are the API reference for clients in
//! every language; this crate holds the Rust code generated from them. The
//! generated client sits behind the `client` feature and the server traits
//! behind `server`, so a client does not compile server code and vice versa.

/// Generated messages, enums, client (`client` feature) and server (`server`
/// feature) of `mcp.tasks.v1`.
pub mod v1 {
    #![allow(missing_docs, missing_debug_implementations, clippy::all)]
    tonic::include_proto!("mcp.tasks.v1");
}

#[cfg(feature = "broker")]
pub mod broker;
#[cfg(feature = "client")]
pub mod credentials;
#[cfg(feature = "client")]
pub mod endpoint;
pub mod jobs;
pub mod protocol;

/// The gRPC metadata naming the tenant a request acts in, for callers whose
/// credentials reach every tenant (a shared worker fleet, operators); other
/// callers act in their own tenant whatever it says.
pub const TENANT_METADATA: &str = "x-taskstore-tenant";

impl v1::TaskStatus {
    /// COMPLETED, FAILED and CANCELLED are final.
    pub fn is_terminal(self) -> bool {
        match self {
            v1::TaskStatus::Completed | v1::TaskStatus::Failed | v1::TaskStatus::Cancelled => true,
            v1::TaskStatus::Unspecified
            | v1::TaskStatus::Working
            | v1::TaskStatus::InputRequired => false,
        }
    }
}

/// The encoded `FileDescriptorSet` of every proto in this crate, for gRPC
/// server reflection (so `grpcurl` needs no proto files).
pub const FILE_DESCRIPTOR_SET: &[u8] =
    tonic::include_file_descriptor_set!("mcp_tasks_v1_descriptor");
