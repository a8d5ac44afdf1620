//! What every edge (gRPC, `/mcp`, the dashboard) shares, so that each rule
//! is written once: admission per tenant (the create rate, the calls and
//! streams kept open) and ending what waits when the server stops.

mod admission;
mod shutdown;

pub use admission::{AdmissionRefused, Admissions, WaitingSlot};
pub use shutdown::{EndOnShutdown, SHUTTING_DOWN, ShuttingDown, unless_shutting_down};
