//! Retry policies per tool: a tool's workers declare how its tasks are
//! retried (attempts, backoff, which failures run again) and every task of
//! the tool follows it, on every backend. Directly, the create carries the
//! policy (the store's contract); through gRPC, the service reads it from
//! the heartbeat that declared it (the edge's), so the same case proves
//! both.

use std::time::Duration;

use taskstore::domain::{
    Claim, DispatchRequest, ReleaseOutcome, ReleaseReason, RetryPolicy, TaskStatus,
    ToolDescription, ToolName, WorkerHeartbeat, WorkerId,
};

use super::*;
use crate::common::{Backend, Stores};

fn tool(name: &str) -> ToolName {
    ToolName::parse(name).expect("tool")
}

/// A worker serving `tools`, each declaring its policy.
async fn declare(stores: &Stores, tools: &[(&str, RetryPolicy)]) {
    let names = tools.iter().map(|(name, _)| tool(name)).collect();
    let descriptions = tools
        .iter()
        .map(|(name, retry)| ToolDescription::undescribed(tool(name)).with_retry(retry.clone()))
        .collect();
    let heartbeat = WorkerHeartbeat::new(WorkerId::parse("w-retry").expect("id"), names, 4, 0)
        .with_descriptions(descriptions);
    stores
        .operations
        .record_heartbeat(&heartbeat)
        .await
        .expect("heartbeat");
}

/// A task of `name`, created as the edge creates it: with the tool's
/// declared policy (which the gRPC client leaves to the service).
async fn dispatched_to(
    stores: &Stores,
    name: &str,
    retry: &RetryPolicy,
    max_attempts: Option<u32>,
) -> TaskId {
    let task = NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            tool: tool(name),
            max_attempts,
            start: None,
            retry: retry.clone(),
        }),
        ..new_task()
    };
    stores
        .store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id
}

/// Claims dispatch `generation` of `id` and gives it back for `reason`
/// (a retryable error says `upstream timeout`): the claim, and what the
/// release decided.
async fn claim_and_release(
    stores: &Stores,
    id: &TaskId,
    generation: u64,
    reason: ReleaseReason,
) -> (Claim, ReleaseOutcome) {
    let claim = stores
        .execution
        .claim(&tenant(), id, generation, "w")
        .await
        .expect("claim");
    let message = match reason {
        ReleaseReason::RetryableError => "upstream timeout",
        _ => "stopping",
    };
    let outcome = stores
        .execution
        .release(&tenant(), id, &claim.lease_token, reason, message)
        .await
        .expect("release");
    (claim, outcome)
}

async fn retried_after(stores: &Stores, id: &TaskId, generation: u64) -> Duration {
    match claim_and_release(stores, id, generation, ReleaseReason::RetryableError)
        .await
        .1
    {
        ReleaseOutcome::Retry { after } => after,
        other => panic!("expected a retry, got {other:?}"),
    }
}

pub async fn a_tools_retry_policy_sets_attempts_and_backoff(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let quick = RetryPolicy {
        max_attempts: Some(5),
        backoff_base: Some(Duration::from_millis(20)),
        backoff_max: Some(Duration::from_millis(40)),
        ..RetryPolicy::default()
    };
    declare(&stores, &[("flaky", quick.clone())]).await;

    let id = dispatched_to(&stores, "flaky", &quick, None).await;
    let (first, _) = claim_and_release(&stores, &id, 1, ReleaseReason::Shutdown).await;
    assert_eq!(first.max_attempts, 5, "the tool's attempts");
    // Equal jitter: between half the ceiling and the ceiling, which
    // doubles from the tool's base up to the tool's cap.
    let after = retried_after(&stores, &id, 2).await;
    assert!(
        (Duration::from_millis(10)..=Duration::from_millis(20)).contains(&after),
        "first retry {after:?}"
    );
    let after = retried_after(&stores, &id, 3).await;
    assert!(
        (Duration::from_millis(20)..=Duration::from_millis(40)).contains(&after),
        "second retry {after:?}"
    );
    let after = retried_after(&stores, &id, 4).await;
    assert!(
        (Duration::from_millis(20)..=Duration::from_millis(40)).contains(&after),
        "capped at the tool's backoff_max: {after:?}"
    );
    let message = stores
        .store
        .get_task(&all(), &id)
        .await
        .expect("get")
        .status_message
        .unwrap_or_default();
    assert!(message.starts_with("attempt 3 of 5 failed"), "{message}");

    // The caller's own number wins over the tool's.
    let asked = dispatched_to(&stores, "flaky", &quick, Some(2)).await;
    let claim = stores
        .execution
        .claim(&tenant(), &asked, 1, "w")
        .await
        .expect("claim");
    assert_eq!(claim.max_attempts, 2, "the caller's attempts");

    // A tool that declares nothing follows the service's policy.
    let plain = dispatched_to(&stores, "echo", &RetryPolicy::default(), None).await;
    let (claim, _) = claim_and_release(&stores, &plain, 1, ReleaseReason::Shutdown).await;
    assert_eq!(claim.max_attempts, short_leases().default_max_attempts);
    let after = retried_after(&stores, &plain, 2).await;
    let base = short_leases().backoff_base;
    assert!(
        (base / 2..=base).contains(&after),
        "the service's backoff: {after:?}"
    );
}

pub async fn a_tool_may_decline_to_retry_errors_or_lost_workers(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let no_errors = RetryPolicy {
        retry_errors: false,
        ..RetryPolicy::default()
    };
    let not_after_a_crash = RetryPolicy {
        retry_lost_workers: false,
        ..RetryPolicy::default()
    };
    declare(
        &stores,
        &[
            ("once", no_errors.clone()),
            ("fragile", not_after_a_crash.clone()),
        ],
    )
    .await;

    // A retryable error fails the task of a tool that retries no errors.
    let once = dispatched_to(&stores, "once", &no_errors, None).await;
    let (_, outcome) = claim_and_release(&stores, &once, 1, ReleaseReason::RetryableError).await;
    assert_eq!(outcome, ReleaseOutcome::Failed);
    let failed = stores
        .store
        .get_result(&all(), &once)
        .await
        .expect("result")
        .task;
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(
        failed.status_message.as_deref(),
        Some("failed: upstream timeout (its tool retries no errors)")
    );

    // A lost worker fails the task of a tool that must not run twice; a
    // shutdown before that still gives the attempt back.
    let fragile = dispatched_to(&stores, "fragile", &not_after_a_crash, None).await;
    let (_, outcome) = claim_and_release(&stores, &fragile, 1, ReleaseReason::Shutdown).await;
    assert_eq!(
        outcome,
        ReleaseOutcome::Retry {
            after: Duration::ZERO
        }
    );
    stores
        .execution
        .claim(&tenant(), &fragile, 2, "crashing")
        .await
        .expect("claim again");
    let_leases_expire().await;
    assert_eq!(
        stores.dispatch.reap_expired_leases().await.expect("reap"),
        1
    );
    let failed = stores
        .store
        .get_result(&all(), &fragile)
        .await
        .expect("result")
        .task;
    assert_eq!(failed.status, TaskStatus::Failed);
    let message = failed.status_message.unwrap_or_default();
    assert!(
        message.contains("crashing") && message.contains("after a lost worker"),
        "{message}"
    );
}
