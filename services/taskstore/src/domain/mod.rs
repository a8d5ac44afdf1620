//! Domain types: what a task is and what the store operations take. Raw input
//! becomes these types once, at the edge; past it, values are known valid.

mod access;
pub mod answers;
mod asked;
mod caller;
mod cursor;
pub mod dispatch_history;
mod dispatch_order;
mod dispatch_turns;
pub mod dispatch_view;
mod execution;
mod fleet;
mod idempotency;
mod ids;
mod input_limits;
mod json;
mod key_counts;
mod limits;
mod mcp;
mod overview;
mod poll;
mod priority;
mod progress;
pub mod questions;
pub mod schema_check;
mod seal;
mod search;
mod sessions;
mod start;
mod status;
mod task;
mod tool_activity;
mod tools;
mod ttl;

pub use access::{
    Operation, acts_only_through_its_attempt, may, may_call, may_in_dashboard, may_log_in,
};
pub use caller::{Caller, Reach, Role, TENANT_METADATA, TenantRefused, UnknownRole};
pub use cursor::{CursorCodec, CursorPosition, InvalidCursor};
pub use dispatch_order::{
    DEFAULT_DISPATCH_WEIGHT, MAX_DISPATCH_WEIGHT, QueueDepth, WaitingJob, next_jobs,
};
pub use dispatch_turns::{FAIRNESS_KEY_WINDOW, KeyWindow, Turns};
pub use dispatch_view::{DispatchRows, KeyDispatch, ToolDispatch};
pub use execution::{
    AttemptEnd, AttemptHistory, AttemptOutcome, AttemptRecord, AttemptState, Claim, ClaimRefusal,
    Claimant, ConcurrencyLimit, DispatchChange, DispatchRequest, Effects, ExecutionPolicy, Fence,
    FenceRefusal, HoldOutcome, HoldRefusal, HoldState, HoldStep, Holder, InvalidKeyLimit,
    InvalidRetryPolicy, KeyExpr, KeyInputs, KeyLimit, LeaseChange, LeaseGrant, LeaseToken,
    MAX_ATTEMPT_RECORDS, MAX_BACK_OFF, MAX_END_MESSAGE_CHARS, MAX_HOLDER_BYTES,
    MAX_REPUBLISH_INTERVAL, NextStep, RUNNING_MESSAGE_FORMAT, RateLimit, ReleaseOutcome,
    ReleaseReason, Renewal, RetryPolicy, SessionRenewal, StopReason, TaskRate, ToolName,
    WorkerSession, after_attempt, attempt_alive, claim_binds_session, decide_hold, error_result,
    held_by, pause_key, running_message, waiting_for_worker_message,
};
pub use fleet::{
    FleetPolicy, OutboxBacklog, ServedTool, WorkerHeartbeat, WorkerId, WorkerInfo,
    differing_descriptions, served_tools, served_tools_of, workers_of,
};
pub use idempotency::{
    DEFAULT_IDEMPOTENCY_RETENTION, IDEMPOTENCY_META_KEY, IdempotencyKey, InvalidIdempotencyKey,
    KeyedCreate, KeyedTask, MAX_IDEMPOTENCY_KEY_BYTES, Replay, replay, same_call,
};
pub use ids::{InvalidId, SessionId, TaskId, TenantId};
pub use input_limits::InputLimits;
pub use json::{ArgumentsNotObject, InvalidJson, JsonObject, RequestId};
pub use key_counts::KeyCounts;
pub use limits::{Admission, AdmissionPolicy, Rate, TokenBucket};
pub use mcp::{ExtensionOutcome, Revision, RevisionRefusal, revision_of};
pub use overview::{
    FAILURE_WINDOW_MINUTES, MinuteCounts, OVERVIEW_MINUTES, Overview, OverviewCounts,
    OverviewWindow, epoch_minute,
};
pub use poll::{MAX_POLL_INTERVAL, PollPolicy};
pub use priority::{InvalidPriority, PRIORITY_META_KEY, Priority};
pub use progress::{
    MAX_PROGRESS_TOKEN_BYTES, PROGRESS_WRITTEN_EVERY, ProgressToken, progress_may_wait, progress_of,
};
pub use questions::{
    Answer, Answered, Answers, AskStep, InputKey, InputMethod, InputRequest, Question,
    QuestionRefusal,
};
pub use seal::{InvalidSeal, MAX_TOKEN_CHARS, Purpose, Sealer};
pub use search::{
    DEFAULT_SEARCH_PAGE, IdPrefix, MAX_MESSAGE_SEARCH_CHARS, MAX_SEARCH_PAGE,
    MAX_WAITING_QUESTIONS, MessageText, SEARCH_SCAN_LIMIT, SearchPage, SearchPosition,
    SearchResults, TaskDetails, TaskSearch, WaitingQuestion,
};
pub use sessions::{MAX_SESSIONS, SessionSummary, order_sessions, summarise_sessions};
pub use start::{
    InvalidStart, MAX_START_DELAY, START_AFTER_META_KEY, START_AT_META_KEY, START_SKEW, StartTime,
    starts_at_message,
};
pub use status::{ResultStatus, TaskStatus, UnknownStatus};
pub use task::{
    NewResult, NewTask, PageRequest, Scope, StatusUpdate, Task, TaskFilter, TaskPage, TaskResult,
    TraceContext, tool_of,
};
pub use tool_activity::{ACTIVITY_SAMPLE, Activity, ActivitySample, ToolActivity};
pub use tools::{
    CallMode, CallModeRefusal, InvalidDescription, TaskSupport, ToolDescription, call_mode,
};
pub use ttl::{InvalidTtl, Ttl, TtlPolicy, TtlRequest};
