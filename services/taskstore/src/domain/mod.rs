//! Domain types: what a task is and what the store operations take. Raw input
//! becomes these types once, at the edge; past it, values are known valid.

mod cursor;
mod execution;
mod ids;
mod json;
mod status;
mod task;
mod ttl;

pub use cursor::{CursorCodec, CursorPosition, InvalidCursor};
pub use execution::{
    Claim, DispatchRequest, ExecutionPolicy, LeaseToken, ReleaseOutcome, ReleaseReason, Renewal,
    ToolName,
};
pub use ids::{InvalidId, SessionId, TaskId, TenantId};
pub use json::{InvalidJson, JsonObject, RequestId};
pub use status::{ResultStatus, TaskStatus, UnknownStatus};
pub use task::{NewResult, NewTask, PageRequest, Scope, StatusUpdate, Task, TaskPage, TaskResult};
pub use ttl::{InvalidTtl, Ttl, TtlPolicy};
