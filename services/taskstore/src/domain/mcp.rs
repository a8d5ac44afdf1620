//! The MCP protocol revisions the gateway speaks, and the decisions where
//! they differ: which revision a request is in, and what a stored task's
//! status is called in each.
//!
//! - 2025-11-25: tasks in the core protocol (an `initialize` handshake,
//!   `tools/call` with a `task` parameter, `tasks/get|result|list|cancel`).
//!   A tool result with `isError: true` is a `failed` task (as stored).
//! - 2026-07-28: tasks as the `io.modelcontextprotocol/tasks` extension
//!   (SEP-2663): no handshake, each request names its revision and the
//!   client's capabilities in `_meta`; `tasks/get` inlines the result; a
//!   tool result with `isError: true` is a `completed` task, `failed` is
//!   kept for a task that ended without a result.

use std::fmt;

use super::status::TaskStatus;

/// A revision of the MCP specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Revision {
    /// Tasks in the core protocol (SEP-1686).
    V2025_11_25,
    /// Tasks as an extension (SEP-2663); no initialize handshake.
    V2026_07_28,
}

impl Revision {
    /// Every revision served, oldest first.
    pub const ALL: [Revision; 2] = [Revision::V2025_11_25, Revision::V2026_07_28];

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == raw)
    }

    /// Whether the revision starts with an `initialize` handshake.
    pub fn has_initialize(self) -> bool {
        self == Revision::V2025_11_25
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// Revisions older than 2025-11-25 that a client may still send in the
/// `MCP-Protocol-Version` header of a handshake-era session. They have no
/// tasks; such a client gets tools only (the gateway answers `initialize`
/// with 2025-11-25, and the client decides whether to go on).
const HANDSHAKE_ERA: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// Why a request's revision was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevisionRefusal {
    /// `_meta` names a revision not served (the spec's -32022, with the
    /// supported ones).
    Unsupported(String),
    /// The `MCP-Protocol-Version` header and `_meta` disagree (-32020).
    HeaderMismatch,
    /// A handshake-era request whose header names an unknown revision (the
    /// transport's HTTP 400).
    BadHeader(String),
}

/// The revision a request is in: the one its `_meta` names (the 2026
/// lifecycle, where every request carries it), else the handshake era,
/// whose requests carry it only in the `MCP-Protocol-Version` header (or,
/// before the handshake, nowhere).
pub fn revision_of(
    meta_version: Option<&str>,
    header_version: Option<&str>,
) -> Result<Revision, RevisionRefusal> {
    match meta_version {
        Some(named) => {
            let revision = Revision::parse(named)
                .filter(|r| !r.has_initialize())
                .ok_or_else(|| RevisionRefusal::Unsupported(named.to_owned()))?;
            match header_version {
                Some(header) if header != named => Err(RevisionRefusal::HeaderMismatch),
                _ => Ok(revision),
            }
        }
        None => match header_version {
            Some(header) if !HANDSHAKE_ERA.contains(&header) => {
                Err(RevisionRefusal::BadHeader(header.to_owned()))
            }
            _ => Ok(Revision::V2025_11_25),
        },
    }
}

/// A task's state as SEP-2663 shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionOutcome {
    Working,
    InputRequired,
    /// Ended with a tool result (with `isError: true` or not): inline it.
    Completed,
    /// Ended without a result: inline a JSON-RPC error.
    Failed,
    Cancelled,
}

impl ExtensionOutcome {
    /// `has_result`: whether a result is stored (a completed or failed
    /// task with a `CallToolResult`).
    pub fn of(status: TaskStatus, has_result: bool) -> Self {
        match (status, has_result) {
            (TaskStatus::Working, _) => ExtensionOutcome::Working,
            (TaskStatus::InputRequired, _) => ExtensionOutcome::InputRequired,
            (TaskStatus::Completed | TaskStatus::Failed, true) => ExtensionOutcome::Completed,
            (TaskStatus::Completed | TaskStatus::Failed, false) => ExtensionOutcome::Failed,
            (TaskStatus::Cancelled, _) => ExtensionOutcome::Cancelled,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ExtensionOutcome::Working => "working",
            ExtensionOutcome::InputRequired => "input_required",
            ExtensionOutcome::Completed => "completed",
            ExtensionOutcome::Failed => "failed",
            ExtensionOutcome::Cancelled => "cancelled",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_revision_comes_from_meta_else_the_handshake_era() {
        use Revision::*;
        assert_eq!(revision_of(None, None), Ok(V2025_11_25));
        assert_eq!(revision_of(None, Some("2025-11-25")), Ok(V2025_11_25));
        assert_eq!(revision_of(None, Some("2025-06-18")), Ok(V2025_11_25));
        assert_eq!(revision_of(Some("2026-07-28"), None), Ok(V2026_07_28));
        assert_eq!(
            revision_of(Some("2026-07-28"), Some("2026-07-28")),
            Ok(V2026_07_28)
        );
        assert_eq!(
            revision_of(Some("2026-07-28"), Some("2025-11-25")),
            Err(RevisionRefusal::HeaderMismatch)
        );
        // 2025-11-25 has a handshake: it is never named per request.
        for named in ["2025-11-25", "2027-01-01", ""] {
            assert_eq!(
                revision_of(Some(named), None),
                Err(RevisionRefusal::Unsupported(named.to_owned()))
            );
        }
        assert_eq!(
            revision_of(None, Some("1999-01-01")),
            Err(RevisionRefusal::BadHeader("1999-01-01".to_owned()))
        );
    }

    #[test]
    fn is_error_results_are_completed_in_the_extension() {
        use ExtensionOutcome as O;
        use TaskStatus as S;
        let table = [
            (S::Working, false, O::Working),
            (S::InputRequired, false, O::InputRequired),
            (S::Completed, true, O::Completed),
            (S::Failed, true, O::Completed),
            (S::Failed, false, O::Failed),
            (S::Completed, false, O::Failed),
            (S::Cancelled, false, O::Cancelled),
        ];
        for (status, has_result, outcome) in table {
            assert_eq!(
                ExtensionOutcome::of(status, has_result),
                outcome,
                "{status}"
            );
        }
    }
}
