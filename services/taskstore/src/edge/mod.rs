//! What every edge (gRPC, `/mcp`, the dashboard) shares, so that each rule
//! is written once: admission per tenant (the create rate, the calls and
//! streams kept open), ending what waits when the server stops, and the
//! accept loop of the HTTP ports.

mod activity;
mod admission;
mod catalog;
mod http_server;
mod shutdown;

pub use admission::{AdmissionRefused, Admissions, WaitingSlot};
pub use catalog::ToolCatalog;
pub use http_server::{ConnectionLimits, serve_until_stopped};
pub use shutdown::{EndOnShutdown, SHUTTING_DOWN, ShuttingDown, unless_shutting_down};
