//! What the dashboard asks of a tenant's tasks: which match a search
//! (newest first, in keyset pages), how many are in each state, who waits
//! for an answer, one task in detail. Every question is bounded (page size,
//! rows examined), so a browser cannot make the store work without end.
//! Parsed here once; every backend answers the same types.

use chrono::{DateTime, TimeZone, Utc};

use super::execution::{AttemptRecord, ToolName};
use super::fleet::WorkerId;
use super::ids::{InvalidId, SessionId, TaskId};
use super::questions::Question;
use super::status::TaskStatus;
use super::task::{Task, TaskResult, TraceContext};

/// The page size when none is asked for.
pub const DEFAULT_SEARCH_PAGE: u32 = 50;
/// The largest page a search returns.
pub const MAX_SEARCH_PAGE: u32 = 100;
/// At most this many tasks are examined for one page: a filter that few
/// tasks match ends the page early ([`SearchResults::truncated`]) instead
/// of scanning the whole tenant.
pub const SEARCH_SCAN_LIMIT: u32 = 5_000;
/// The longest status-message text searched for, in characters.
pub const MAX_MESSAGE_SEARCH_CHARS: usize = 200;
/// At most this many waiting questions are listed.
pub const MAX_WAITING_QUESTIONS: u32 = 500;

/// Which tasks a search matches. Empty parts match every task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaskSearch {
    /// Only tasks in one of these statuses.
    pub statuses: Vec<TaskStatus>,
    pub tool: Option<ToolName>,
    pub session: Option<SessionId>,
    /// Only tasks whose current (or last) attempt ran on this worker.
    pub worker: Option<WorkerId>,
    /// Created at or after.
    pub created_from: Option<DateTime<Utc>>,
    /// Created before.
    pub created_until: Option<DateTime<Utc>>,
    /// Only tasks whose id starts with this.
    pub id_prefix: Option<IdPrefix>,
    /// Only tasks whose status message contains this, ignoring case.
    pub message: Option<MessageText>,
}

impl TaskSearch {
    /// Whether `task`, whose current attempt runs on `worker` (if any),
    /// matches. The in-memory backend's answer, and the rule the SQL of
    /// the others restates.
    pub fn matches(&self, task: &Task, worker: Option<&str>) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&task.status))
            && self
                .tool
                .as_ref()
                .is_none_or(|tool| task.tool.as_ref() == Some(tool))
            && self
                .session
                .as_ref()
                .is_none_or(|session| task.session_id.as_ref() == Some(session))
            && self
                .worker
                .as_ref()
                .is_none_or(|wanted| worker == Some(wanted.as_str()))
            && self.created_from.is_none_or(|from| task.created_at >= from)
            && self
                .created_until
                .is_none_or(|until| task.created_at < until)
            && self
                .id_prefix
                .as_ref()
                .is_none_or(|prefix| task.task_id.as_str().starts_with(prefix.as_str()))
            && self.message.as_ref().is_none_or(|text| {
                task.status_message
                    .as_deref()
                    .is_some_and(|message| text.is_in(message))
            })
    }
}

/// The start of a task id: 1 to 128 printable ASCII characters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdPrefix(String);

impl IdPrefix {
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        TaskId::parse(raw).map(|id| Self(id.as_str().to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Text searched for in status messages: 1 to
/// [`MAX_MESSAGE_SEARCH_CHARS`] characters, no control characters; kept in
/// lowercase (the search ignores case).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageText(String);

impl MessageText {
    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        let raw = raw.trim();
        if raw.is_empty() || raw.chars().count() > MAX_MESSAGE_SEARCH_CHARS {
            return Err(InvalidId("must be 1 to 200 characters"));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidId("must not contain control characters"));
        }
        Ok(Self(raw.to_lowercase()))
    }

    /// The text, in lowercase.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_in(&self, message: &str) -> bool {
        message.to_lowercase().contains(&self.0)
    }
}

/// Where a page of a newest-first search continues: after the task created
/// at `created_at` with id `task_id` (ties broken by id, descending). Not
/// sealed: it grants nothing (the tenant comes from the caller), and a
/// tampered one only moves the page within the caller's own tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPosition {
    pub created_at: DateTime<Utc>,
    pub task_id: TaskId,
}

impl SearchPosition {
    pub fn of(task: &Task) -> Self {
        Self {
            created_at: task.created_at,
            task_id: task.task_id.clone(),
        }
    }

    /// `<microseconds since the epoch>.<task id>`, for a URL.
    pub fn encode(&self) -> String {
        format!("{}.{}", self.created_at.timestamp_micros(), self.task_id)
    }

    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        const INVALID: InvalidId = InvalidId("is not a position this service wrote");
        let (micros, id) = raw.split_once('.').ok_or(INVALID)?;
        let micros: i64 = micros.parse().map_err(|_| INVALID)?;
        let created_at = Utc.timestamp_micros(micros).single().ok_or(INVALID)?;
        let task_id = TaskId::parse(id).map_err(|_| INVALID)?;
        Ok(Self {
            created_at,
            task_id,
        })
    }

    /// Whether `task` comes after this position, newest first.
    pub fn is_before(&self, task: &Task) -> bool {
        (task.created_at, &task.task_id) < (self.created_at, &self.task_id)
    }
}

/// One page of a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchPage {
    /// 1 to [`MAX_SEARCH_PAGE`].
    pub size: u32,
    pub after: Option<SearchPosition>,
}

impl SearchPage {
    /// A page of `size` tasks (the default for `None` or 0, capped).
    pub fn new(size: Option<u32>, after: Option<SearchPosition>) -> Self {
        let size = match size {
            None | Some(0) => DEFAULT_SEARCH_PAGE,
            Some(size) => size.min(MAX_SEARCH_PAGE),
        };
        Self { size, after }
    }

    /// The page size, 1 to [`MAX_SEARCH_PAGE`] whatever `size` says.
    pub fn limit(&self) -> u32 {
        self.size.clamp(1, MAX_SEARCH_PAGE)
    }
}

impl Default for SearchPage {
    /// The first page, of the default size.
    fn default() -> Self {
        SearchPage::new(None, None)
    }
}

/// The tasks of a page, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchResults {
    pub tasks: Vec<Task>,
    /// Where the next page starts; `None` when nothing more matches.
    pub next: Option<SearchPosition>,
    /// The page ended because [`SEARCH_SCAN_LIMIT`] tasks were examined,
    /// not because nothing more matches: `next` continues the scan.
    pub truncated: bool,
}

impl SearchResults {
    /// A full page: `matched` holds the tasks that matched among those
    /// examined, newest first, and at most one more than the page. More
    /// than a page matched: the page, continuing after its last task. Else
    /// `Err(matched)`: the page ends where the scan ended
    /// ([`SearchResults::scan_ended`]). Every backend pages this way.
    pub fn filled(mut matched: Vec<Task>, page: &SearchPage) -> Result<Self, Vec<Task>> {
        let size = page.limit() as usize;
        if matched.len() <= size {
            return Err(matched);
        }
        matched.truncate(size);
        let next = matched.last().map(SearchPosition::of);
        Ok(Self {
            tasks: matched,
            next,
            truncated: false,
        })
    }

    /// The page when no more than a page matched among the `examined`
    /// tasks, the last of which is `last_examined`: when the scan stopped
    /// at [`SEARCH_SCAN_LIMIT`] tasks, more may match after it, so the page
    /// is truncated and the next continues the scan there; else it is the
    /// last page.
    pub fn scan_ended(
        matched: Vec<Task>,
        examined: u64,
        last_examined: Option<SearchPosition>,
    ) -> Self {
        let truncated = examined >= u64::from(SEARCH_SCAN_LIMIT);
        Self {
            tasks: matched,
            next: last_examined.filter(|_| truncated),
            truncated,
        }
    }
}

/// An open question and the task that asked it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitingQuestion {
    pub task: Task,
    pub question: Question,
}

/// One task with everything the dashboard shows of it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskDetails {
    pub task: Task,
    /// The MCP request that created it, as the caller sent it (JSON text).
    pub request_json: String,
    /// Its result, once completed or failed.
    pub result: Option<TaskResult>,
    /// Its questions, open and answered, in the order asked.
    pub questions: Vec<Question>,
    /// The attempt running now or last run (0: never claimed), of how many.
    pub attempt: u32,
    pub max_attempts: Option<u32>,
    /// The worker (or holder) whose lease it is under now, and until when.
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The trace it continues, if the creator sent one.
    pub trace: Option<TraceContext>,
    /// Its attempts, oldest first: the newest `MAX_ATTEMPT_RECORDS`, after
    /// `attempts_dropped` older ones.
    pub attempts: Vec<AttemptRecord>,
    pub attempts_dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_refuse_what_this_service_did_not_write() {
        let at = Utc.timestamp_micros(1_764_000_000_123_456).single();
        let position = SearchPosition {
            created_at: at.expect("a valid instant"),
            task_id: TaskId::parse("abc.def").expect("a valid id"),
        };
        assert_eq!(SearchPosition::parse(&position.encode()), Ok(position));
        for raw in [
            "",
            ".",
            "12",
            "x.abc",
            "12.",
            "12.a b",
            "99999999999999999999.a",
        ] {
            assert!(SearchPosition::parse(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn message_text_is_bounded_and_ignores_case() {
        let text = MessageText::parse("  Disk FULL ").expect("valid");
        assert!(text.is_in("the disk full again"));
        assert!(!text.is_in("disk almost full"));
        assert!(MessageText::parse("").is_err());
        assert!(MessageText::parse("a\u{7}").is_err());
        assert!(MessageText::parse(&"x".repeat(201)).is_err());
    }

    #[test]
    fn pages_are_capped() {
        assert_eq!(SearchPage::new(None, None).size, DEFAULT_SEARCH_PAGE);
        assert_eq!(SearchPage::new(Some(0), None).size, DEFAULT_SEARCH_PAGE);
        assert_eq!(SearchPage::new(Some(10_000), None).size, MAX_SEARCH_PAGE);
    }
}
