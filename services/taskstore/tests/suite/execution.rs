//! The execution protocol, through the worker-facing API: claims, fenced
//! reports, lease expiry, renewals, retries, poison tasks and cancellation.
//! Leases expire by waiting (1 s leases), as a frozen worker's would.

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{
    LeaseToken, ReleaseOutcome, ReleaseReason, Renewal, StatusUpdate, StopReason, TaskId,
    TaskStatus,
};
use tokio_stream::StreamExt;

use super::*;
use crate::assert_err;
use crate::common::{Backend, Stores};

/// Claims that arrive together (and may be decided together) each get
/// their own lease, attempt and running message; one task claimed twice
/// among them goes to one claimer.
pub async fn concurrent_claims_each_get_their_own_lease(backend: &dyn Backend) {
    let Stores {
        store, execution, ..
    } = backend.stores(with_policy(short_leases())).await;
    let mut ids = Vec::new();
    for _ in 0..40 {
        ids.push(dispatched(&store, None).await);
    }
    let mut claims = tokio::task::JoinSet::new();
    for (n, id) in ids.iter().chain(ids.iter().take(10)).enumerate() {
        let (execution, id) = (execution.clone(), id.clone());
        claims.spawn(async move {
            let worker = format!("worker-{n}");
            let claim = execution.claim(&tenant(), &id, 1, &worker).await;
            (id, worker, claim)
        });
    }
    let outcomes = claims.join_all().await;
    let won: Vec<_> = outcomes
        .iter()
        .filter_map(|(id, worker, claim)| claim.as_ref().ok().map(|c| (id, worker, c)))
        .collect();
    assert_eq!(won.len(), 40, "one claim per task wins");
    let tokens: std::collections::HashSet<_> = won.iter().map(|(_, _, c)| &c.lease_token).collect();
    assert_eq!(tokens.len(), 40, "every lease is its own");
    for (id, worker, claim) in won {
        assert_eq!(claim.attempt, 1);
        let task = store.get_task(&all(), id).await.expect("get");
        assert_eq!(
            task.status_message.as_deref(),
            Some(format!("running on {worker} (attempt 1 of 3)").as_str()),
            "the message names the winner"
        );
    }
}

pub async fn exactly_one_of_many_claims_wins(backend: &dyn Backend) {
    let Stores {
        store, execution, ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    let mut claims = tokio::task::JoinSet::new();
    for worker in 0..10 {
        let (execution, id) = (execution.clone(), id.clone());
        claims.spawn(async move {
            execution
                .claim(&tenant(), &id, 1, &format!("worker-{worker}"))
                .await
        });
    }
    let outcomes = claims.join_all().await;
    let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| o.is_err())
            .all(|o| matches!(o, Err(StoreError::FailedPrecondition(_))))
    );
    let claim = winners[0];
    assert_eq!(
        (claim.attempt, claim.max_attempts, claim.tool.as_str()),
        (1, 3, "echo")
    );
    assert!(claim.request.as_str().contains("\"hi\""));
    let task = store.get_task(&all(), &id).await.expect("get");
    assert!(
        task.status_message
            .as_deref()
            .is_some_and(|m| m.contains("attempt 1 of 3")),
        "{task:?}"
    );
    // A duplicate of the same job, or a job of another generation, is stale.
    assert_err!(
        execution.claim(&tenant(), &id, 1, "late").await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        execution.claim(&tenant(), &id, 7, "stale").await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        execution
            .claim(&tenant(), &TaskId::parse("nope").expect("id"), 1, "w")
            .await,
        StoreError::NotFound
    );
}

pub async fn reports_are_fenced_by_the_lease(backend: &dyn Backend) {
    let Stores {
        store, execution, ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    let claim = execution
        .claim(&tenant(), &id, 1, "w1")
        .await
        .expect("claim");
    let forged = LeaseToken::parse("not-the-lease").expect("token");

    let progress = StatusUpdate {
        status: TaskStatus::InputRequired,
        message: Some("need a file".into()),
        lease: Some(claim.lease_token.clone()),
    };
    assert_eq!(
        store
            .update_status(&all(), &id, progress)
            .await
            .expect("fenced update")
            .status,
        TaskStatus::InputRequired
    );
    let forged_update = StatusUpdate {
        status: TaskStatus::Working,
        message: None,
        lease: Some(forged.clone()),
    };
    assert_err!(
        store.update_status(&all(), &id, forged_update).await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store.store_result(&all(), &id, result(&forged)).await,
        StoreError::FailedPrecondition(_)
    );
    assert_eq!(
        execution
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::KeepRunning
    );
    assert!(matches!(
        execution
            .renew(&tenant(), &id, &forged)
            .await
            .expect("renew"),
        Renewal::Stop(_)
    ));
    // What a worker's follow asks: the same answers, without a renewal.
    let check = |lease: LeaseToken| {
        let (execution, id) = (execution.clone(), id.clone());
        async move {
            execution
                .check(&tenant(), &id, &lease)
                .await
                .expect("check")
        }
    };
    assert_eq!(check(claim.lease_token.clone()).await, Renewal::KeepRunning);
    assert_eq!(
        check(forged.clone()).await,
        Renewal::Stop(StopReason::LeaseLost)
    );

    store
        .store_result(&all(), &id, result(&claim.lease_token))
        .await
        .expect("the lease holder stores");
    assert_err!(
        store
            .store_result(&all(), &id, result(&claim.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert!(matches!(
        execution
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop(_)
    ));
    assert_eq!(
        check(claim.lease_token.clone()).await,
        Renewal::Stop(StopReason::Finished)
    );
}

pub async fn an_expired_lease_dispatches_again_and_fences_the_old_attempt(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    let first = execution
        .claim(&tenant(), &id, 1, "frozen")
        .await
        .expect("claim");
    assert_eq!(
        dispatch.reap_expired_leases().await.expect("reap"),
        0,
        "a live lease is left alone"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);

    let message = store
        .get_task(&all(), &id)
        .await
        .expect("get")
        .status_message
        .unwrap_or_default();
    assert!(
        message.contains("frozen") && message.contains("dispatched again"),
        "{message}"
    );
    // The frozen worker wakes up: everything it says is refused.
    assert!(matches!(
        execution
            .renew(&tenant(), &id, &first.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop(_)
    ));
    assert_err!(
        store
            .store_result(&all(), &id, result(&first.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    let second = execution
        .claim(&tenant(), &id, 2, "healthy")
        .await
        .expect("claim again");
    assert_eq!(second.attempt, 2);
    store
        .store_result(&all(), &id, result(&second.lease_token))
        .await
        .expect("store");
    assert_eq!(
        store
            .get_result(&all(), &id)
            .await
            .expect("result")
            .task
            .status,
        TaskStatus::Completed
    );
}

pub async fn renewals_keep_a_long_task_alive(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    let claim = execution
        .claim(&tenant(), &id, 1, "steady")
        .await
        .expect("claim");
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            execution
                .renew(&tenant(), &id, &claim.lease_token)
                .await
                .expect("renew"),
            Renewal::KeepRunning
        );
        assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 0);
    }
    // Never taken away from a live worker: no new generation exists.
    assert_err!(
        execution.claim(&tenant(), &id, 2, "thief").await,
        StoreError::FailedPrecondition(_)
    );
}

pub async fn a_poison_task_fails_after_its_attempts(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, Some(2)).await;
    for attempt in 1..=2u64 {
        execution
            .claim(&tenant(), &id, attempt, &format!("crashy-{attempt}"))
            .await
            .expect("claim");
        let_leases_expire().await;
        assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);
    }
    let result = store
        .get_result(&all(), &id)
        .await
        .expect("a failure result");
    assert_eq!(result.task.status, TaskStatus::Failed);
    let message = result.task.status_message.unwrap_or_default();
    assert!(
        message.contains("failed after 2 attempts") && message.contains("crashy-2"),
        "{message}"
    );
    let body: serde_json::Value = serde_json::from_str(result.result.as_str()).expect("json");
    assert_eq!(body["isError"], true);
}

pub async fn retryable_errors_back_off_then_fail_and_shutdown_gives_the_attempt_back(
    backend: &dyn Backend,
) {
    let Stores {
        store, execution, ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, Some(2)).await;

    let claim = execution
        .claim(&tenant(), &id, 1, "w")
        .await
        .expect("claim");
    let outcome = execution
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::Shutdown,
            "stopping",
        )
        .await
        .expect("release");
    assert_eq!(
        outcome,
        ReleaseOutcome::Retry {
            after: Duration::ZERO
        }
    );
    let claim = execution
        .claim(&tenant(), &id, 2, "w")
        .await
        .expect("claim after shutdown");
    assert_eq!(claim.attempt, 1, "a shutdown does not use an attempt");

    let outcome = execution
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::RetryableError,
            "timeout upstream",
        )
        .await
        .expect("release");
    let ReleaseOutcome::Retry { after } = outcome else {
        panic!("expected a retry, got {outcome:?}")
    };
    assert!(
        after >= Duration::from_millis(100) && after <= Duration::from_millis(200),
        "{after:?}"
    );
    let message = store
        .get_task(&all(), &id)
        .await
        .expect("get")
        .status_message
        .unwrap_or_default();
    assert!(
        message.contains("attempt 1 of 2 failed: timeout upstream"),
        "{message}"
    );
    assert_err!(
        execution
            .release(
                &tenant(),
                &id,
                &claim.lease_token,
                ReleaseReason::RetryableError,
                "again"
            )
            .await,
        StoreError::FailedPrecondition(_)
    );

    let claim = execution
        .claim(&tenant(), &id, 3, "w")
        .await
        .expect("claim the retry");
    assert_eq!(claim.attempt, 2);
    let outcome = execution
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::RetryableError,
            "still down",
        )
        .await
        .expect("release");
    assert_eq!(outcome, ReleaseOutcome::Failed);
    let result = store.get_result(&all(), &id).await.expect("failure result");
    assert_eq!(result.task.status, TaskStatus::Failed);
    assert!(
        result
            .task
            .status_message
            .unwrap_or_default()
            .contains("failed after 2 attempts: still down")
    );
}

pub async fn cancellation_reaches_the_running_attempt_at_once(backend: &dyn Backend) {
    let Stores {
        store, execution, ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    let claim = execution
        .claim(&tenant(), &id, 1, "w")
        .await
        .expect("claim");
    let mut watch = store.watch_task(&all(), &id).await.expect("watch");
    watch.next().await.expect("first").expect("task");
    let started = tokio::time::Instant::now();
    store.cancel_task(&all(), &id).await.expect("cancel");
    let seen = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("notified")
        .expect("item")
        .expect("task");
    assert_eq!(seen.status, TaskStatus::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "seen in {:?}",
        started.elapsed()
    );
    assert_eq!(
        execution
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop(StopReason::Cancelled)
    );
    assert_err!(
        store
            .store_result(&all(), &id, result(&claim.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store.get_result(&all(), &id).await,
        StoreError::FailedPrecondition(_)
    );
}
