//! The conformance suite: the MCP task-store contract, written once as
//! generic async cases over [`Backend`], and instantiated per backend by
//! [`conformance_suite!`]. A new backend passes when every case passes.

pub mod announced;
pub mod answers;
pub mod attempts;
pub mod concurrency;
pub mod create;
pub mod deletion;
pub mod dispatch_order;
pub mod execution;
pub mod expiry;
pub mod following;
pub mod holding;
pub mod idempotency;
pub mod insights;
pub mod insights_glance;
pub mod insights_sessions;
pub mod isolation;
pub mod key_limits;
pub mod key_pauses;
pub mod lifecycle;
pub mod listing;
pub mod lost_jobs;
pub mod questions;
pub mod relay;
pub mod retry_policy;
pub mod start_times;
pub mod watching;
pub mod worker_sessions;

use std::sync::Arc;
use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{
    DispatchRequest, ExecutionPolicy, InputKey, InputRequest, JsonObject, LeaseToken, NewResult,
    NewTask, PageRequest, RequestId, ResultStatus, Scope, SessionId, StatusUpdate, Task, TaskId,
    TaskStatus, TenantId, ToolName, Ttl,
};
use taskstore::store::TaskStore;

/// Every case, one test each, for the backend expression given.
#[macro_export]
macro_rules! conformance_suite {
    ($backend:expr) => {
        $crate::conformance_cases!($backend;
            announced::every_write_that_changes_a_task_is_announced,
            create::starts_working_with_a_generated_id,
            create::returns_the_actual_ttl,
            create::caller_supplied_ids_are_unique,
            create::ids_urls_cannot_carry_are_refused,
            create::binds_the_session,
            create::reuses_the_id_of_an_expired_task,
            create::no_expiry_is_granted_only_without_a_maximum,
            create::a_requested_poll_interval_is_granted_within_bounds,
            idempotency::concurrent_creates_with_one_key_make_one_task,
            idempotency::a_key_never_hands_over_another_calls_task,
            idempotency::a_key_is_freed_by_its_retention_and_by_its_tasks_end,
            idempotency::a_retry_is_answered_whatever_would_refuse_a_create,
            deletion::deletes_a_task_whatever_its_status,
            deletion::deletes_only_what_the_caller_sees,
            deletion::a_watcher_learns_that_its_task_was_deleted,
            deletion::a_deleted_task_leaves_no_job_to_run,
            lifecycle::status_moves_along_the_lifecycle,
            lifecycle::terminal_tasks_refuse_updates_and_change_nothing,
            lifecycle::stores_and_returns_results_verbatim,
            lifecycle::first_result_stays,
            lifecycle::result_is_refused_until_there_is_one,
            lifecycle::cancel_is_idempotent,
            listing::pages_oldest_first_without_gaps,
            listing::page_sizes_follow_the_policy,
            listing::refuses_tampered_and_foreign_cursors,
            listing::filters_by_session_before_paging,
            listing::sees_tasks_created_between_pages,
            listing::drops_tasks_that_expire_between_pages,
            listing::survives_concurrent_updates,
            listing::filters_by_status_and_tool_before_paging,
            expiry::expired_tasks_are_not_found_anywhere,
            expiry::reaching_a_terminal_status_extends_expiry,
            expiry::cleanup_deletes_only_expired_tasks,
            expiry::concurrent_cleanups_split_the_work,
            isolation::other_sessions_tasks_are_not_found,
            isolation::tenants_never_see_each_other,
            concurrency::max_tasks_holds_under_concurrent_creates,
            concurrency::max_tasks_per_session_holds_under_concurrent_creates,
            concurrency::quotas_count_unexpired_tasks_only,
            concurrency::exactly_one_of_concurrent_results_wins,
            concurrency::concurrent_progress_reports_on_one_task_all_land,
            concurrency::cancel_racing_a_result_has_one_outcome,
            concurrency::concurrent_creates_of_one_id_have_one_winner,
            watching::watch_streams_every_change_until_terminal,
            watching::watch_of_a_terminal_task_ends_at_once,
            watching::waiting_for_a_result_wakes_when_it_is_stored,
            watching::waiting_for_a_result_gives_up_at_its_timeout,
            following::following_shows_every_change_of_the_scope_in_order,
            following::following_carries_the_progress_token,
            following::following_never_shows_another_tenants_tasks,
            holding::a_held_task_fails_when_its_holder_stops_renewing,
            holding::holds_are_refused_where_they_do_not_belong,
            execution::exactly_one_of_many_claims_wins,
            execution::concurrent_claims_each_get_their_own_lease,
            execution::reports_are_fenced_by_the_lease,
            execution::an_expired_lease_dispatches_again_and_fences_the_old_attempt,
            execution::renewals_keep_a_long_task_alive,
            worker_sessions::one_session_renewal_keeps_every_attempt_alive,
            worker_sessions::an_expired_session_dispatches_its_attempts_again_and_fences_them,
            worker_sessions::an_unknown_session_keeps_nothing_alive,
            execution::a_poison_task_fails_after_its_attempts,
            execution::retryable_errors_back_off_then_fail_and_shutdown_gives_the_attempt_back,
            execution::cancellation_reaches_the_running_attempt_at_once,
            relay::the_relay_publishes_each_job_once_and_drops_stale_ones,
            relay::a_job_for_an_unserved_tool_waits_and_says_so,
            relay::the_relay_wakes_at_once_on_a_new_job,
            relay::a_job_carries_the_trace_its_task_was_created_in,
            lost_jobs::a_job_nobody_claimed_is_published_again_until_it_is,
            start_times::a_task_starts_not_before_its_start_time,
            start_times::start_times_a_task_may_not_have_are_refused,
            dispatch_order::a_backlog_goes_out_by_priority_with_tenants_taking_turns,
            dispatch_order::a_queue_with_room_takes_new_jobs_at_once_in_order,
            dispatch_order::priorities_out_of_range_are_refused,
            dispatch_order::a_heavier_tenant_gets_more_turns,
            dispatch_order::a_tenants_fairness_keys_take_turns,
            retry_policy::a_tools_retry_policy_sets_attempts_and_backoff,
            retry_policy::a_tool_may_decline_to_retry_errors_or_lost_workers,
            key_limits::a_key_runs_no_more_than_its_limit_at_once,
            key_limits::a_slot_comes_back_when_its_workers_lease_expires,
            key_limits::an_operator_sets_a_tenants_own_limit_per_tool,
            key_limits::a_parked_task_holds_no_slot,
            key_limits::a_keys_rate_holds_its_starts_per_window,
            key_pauses::a_back_off_holds_its_key_until_the_time_and_spends_no_attempt,
            key_pauses::what_is_held_back_shows_per_tool_and_key,
            questions::a_question_waits_for_its_answer_and_is_answered_once,
            questions::a_partial_answer_keeps_the_task_waiting,
            questions::only_the_attempt_holding_the_lease_asks,
            questions::answers_reach_only_the_callers_own_tasks,
            questions::a_parked_task_is_dispatched_again_by_its_answer,
            questions::an_answer_before_the_park_dispatches_at_once,
            questions::questions_go_with_their_task,
            answers::an_answer_that_does_not_match_the_requested_schema_is_refused,
        );
    };
}

/// The dashboard's reads ([`taskstore::store::TaskInsights`]), for the
/// backends called directly: they are not served over gRPC.
#[macro_export]
macro_rules! insights_suite {
    ($backend:expr) => {
        $crate::conformance_cases!($backend;
            insights::search_pages_newest_first_without_gaps_or_repeats,
            insights::search_filters_alone_and_combined,
            insights::ids_and_messages_are_matched_literally,
            insights::the_scan_limit_ends_a_page_early_and_the_next_continues,
            insights_glance::the_overview_counts_statuses_questions_failures_and_minutes,
            insights_glance::waiting_questions_come_oldest_first_with_their_tasks,
            insights_glance::task_details_carry_request_result_questions_and_attempt,
            insights_glance::expired_and_other_tenants_tasks_are_in_no_read,
            insights_sessions::sessions_are_listed_most_recently_active_first,
            insights_sessions::tool_activity_counts_each_tools_ends_and_times_in_the_last_hour,
            attempts::a_retried_task_shows_each_attempt_and_how_it_ended,
            attempts::a_lapsed_lease_is_recorded_as_such,
            attempts::the_newest_attempts_are_kept_and_the_dropped_counted,
            attempts::a_tasks_history_goes_with_it,
        );
    };
}

#[macro_export]
macro_rules! conformance_cases {
    ($backend:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                $crate::suite::$module::$case(&$backend).await;
            }
        )*
    };
}

/// Asserts that a result is the given error variant.
#[macro_export]
macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err($pattern) => {}
            other => panic!("expected {}, got {other:?}", stringify!($pattern)),
        }
    };
}

pub type Store = Arc<dyn TaskStore>;

/// The tenant every case acts for.
pub fn tenant() -> TenantId {
    TenantId::default_tenant()
}

/// One-second leases and quick retries, so that cases can wait them out.
pub fn short_leases() -> ExecutionPolicy {
    ExecutionPolicy {
        lease_duration: Duration::from_secs(1),
        default_max_attempts: 3,
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(1),
        ..ExecutionPolicy::default()
    }
}

pub fn with_policy(execution: ExecutionPolicy) -> taskstore::store::StoreConfig {
    taskstore::store::StoreConfig {
        execution,
        ..taskstore::store::StoreConfig::default()
    }
}

/// Waits past a lease of [`short_leases`], as if the worker froze.
pub async fn let_leases_expire() {
    tokio::time::sleep(Duration::from_millis(1200)).await;
}

/// A task dispatched to `echo`.
pub async fn dispatched(store: &Store, max_attempts: Option<u32>) -> TaskId {
    let task = NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts,
        }),
        ..new_task()
    };
    store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id
}

/// A completed result, fenced by `lease`.
pub fn result(lease: &LeaseToken) -> NewResult {
    NewResult {
        lease: Some(lease.clone()),
        ..completed(r#"{"content":[]}"#)
    }
}

pub fn ttl(ms: u64) -> Ttl {
    Ttl::from_millis(ms).expect("valid ttl")
}

pub fn new_task() -> NewTask {
    NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: Default::default(),
        poll_interval: None,
        request_id: RequestId::parse("7").expect("valid id"),
        request: JsonObject::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        )
        .expect("valid request"),
        dispatch: None,
        trace_context: None,
    }
}

pub fn task_with_ttl(ms: u64) -> NewTask {
    NewTask {
        ttl: Some(ttl(ms)).into(),
        ..new_task()
    }
}

pub fn task_with_id(id: &str) -> NewTask {
    NewTask {
        task_id: Some(TaskId::parse(id).expect("valid id")),
        ..new_task()
    }
}

pub fn all() -> Scope {
    Scope::tenant_wide()
}

pub fn session(name: &str) -> Scope {
    Scope::session(SessionId::parse(name, 256).expect("valid session"))
}

pub fn completed(json: &str) -> NewResult {
    NewResult {
        status: ResultStatus::Completed,
        result: JsonObject::parse(json).expect("valid result"),
        message: None,
        lease: None,
    }
}

/// The key a question is asked under.
pub fn input_key(k: &str) -> InputKey {
    InputKey::parse(k).expect("key")
}

/// An elicitation asking `message`, answered with `{"ok": boolean}`.
pub fn confirm_question(message: &str) -> InputRequest {
    InputRequest::parse(format!(
        r#"{{"method":"elicitation/create","params":{{"message":"{message}","requestedSchema":{{"type":"object","properties":{{"ok":{{"type":"boolean"}}}}}}}}}}"#
    ))
    .expect("request")
}

/// The answer that accepts a [`confirm_question`].
pub fn accept_ok() -> JsonObject {
    JsonObject::parse(r#"{"action":"accept","content":{"ok":true}}"#).expect("answer")
}

pub fn status(status: TaskStatus, message: Option<&str>) -> StatusUpdate {
    StatusUpdate {
        status,
        message: message.map(str::to_owned),
        lease: None,
    }
}

pub async fn create(store: &Store, scope: &Scope) -> Task {
    store.create_task(scope, new_task()).await.expect("create")
}

/// An unfiltered page request.
pub fn page_request(cursor: Option<String>, page_size: Option<u32>) -> PageRequest {
    PageRequest {
        cursor,
        page_size,
        ..PageRequest::default()
    }
}

/// Every task in `scope`, following cursors, `page_size` at a time.
pub async fn list_all(store: &Store, scope: &Scope, page_size: u32) -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_tasks(
                scope,
                PageRequest {
                    cursor,
                    page_size: Some(page_size),
                    ..Default::default()
                },
            )
            .await
            .expect("list");
        assert!(page.tasks.len() <= page_size as usize);
        tasks.extend(page.tasks);
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return tasks,
        }
    }
}

pub fn ids(tasks: &[Task]) -> Vec<String> {
    tasks.iter().map(|t| t.task_id.to_string()).collect()
}

pub async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// The error of a store call, for cases that compare messages.
pub fn err_message<T: std::fmt::Debug>(result: Result<T, StoreError>) -> String {
    result.expect_err("expected an error").to_string()
}
