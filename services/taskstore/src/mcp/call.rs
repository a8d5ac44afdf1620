//! What a request is, once the HTTP edge has checked it: who calls, in
//! which scope and revision, and what the client declared.

use super::jsonrpc::Id;
use crate::domain::{Caller, Revision, Scope};

/// One request's context, from the HTTP edge.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub caller: Caller,
    /// The caller's tenant and, in 2025-11-25, the MCP session.
    pub scope: Scope,
    pub revision: Revision,
    /// The request's id (`None` for a notification).
    pub id: Option<Id>,
    /// 2026-07-28: whether the client declared the tasks extension.
    pub tasks_extension: bool,
}
