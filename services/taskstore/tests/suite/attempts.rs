//! The attempt history the dashboard shows ([`TaskDetails::attempts`]) on
//! every backend: a record per claim or hold, closed by whatever ended the
//! attempt (a release of any reason, a result, a cancellation, a lapsed
//! lease), capped at the newest [`MAX_ATTEMPT_RECORDS`] with the dropped
//! ones counted, and gone with its task.

use taskstore::StoreError;
use taskstore::domain::{
    AttemptEnd, AttemptOutcome, AttemptRecord, HoldOutcome, Holder, MAX_ATTEMPT_RECORDS,
    ReleaseReason, ResultStatus, TaskDetails,
};
use taskstore::store::StoreConfig;

use super::insights::{dispatched_to, named};
use super::*;
use crate::assert_err;
use crate::common::{Backend, Stores};

async fn details(stores: &Stores, id: &TaskId) -> TaskDetails {
    stores
        .insights
        .task_details(&tenant(), id)
        .await
        .expect("details")
}

async fn claim(stores: &Stores, id: &TaskId, generation: u64, worker: &str) -> LeaseToken {
    stores
        .execution
        .claim(&tenant(), id, generation, worker)
        .await
        .expect("claim")
        .lease_token
}

/// Who ran each record's attempt, its number, and how it ended.
fn summary(records: &[AttemptRecord]) -> Vec<(u32, String, Option<AttemptOutcome>)> {
    records
        .iter()
        .map(|r| (r.attempt, r.worker.clone(), r.end.clone()))
        .collect()
}

fn check_times(records: &[AttemptRecord]) {
    for (n, record) in records.iter().enumerate() {
        if let Some(ended) = record.ended_at {
            assert!(ended >= record.started_at, "record {n}: {record:?}");
        }
        if let Some(next) = records.get(n + 1) {
            assert!(next.started_at >= record.started_at, "oldest first");
        }
    }
}

pub async fn a_retried_task_shows_each_attempt_and_how_it_ended(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&stores.store, Some(3)).await;
    assert!(details(&stores, &id).await.attempts.is_empty());

    let first = claim(&stores, &id, 1, "w-1").await;
    let running = details(&stores, &id).await;
    assert_eq!(summary(&running.attempts), [(1, "w-1".into(), None)]);
    assert_eq!(running.attempts[0].ended_at, None, "open while it runs");
    stores
        .execution
        .release(
            &tenant(),
            &id,
            &first,
            ReleaseReason::RetryableError,
            "timeout",
        )
        .await
        .expect("release");
    let second = claim(&stores, &id, 2, "w-2").await;
    stores
        .store
        .store_result(
            &all(),
            &id,
            NewResult {
                message: Some("done".into()),
                ..result(&second)
            },
        )
        .await
        .expect("result");
    let finished = details(&stores, &id).await;
    let retryable = AttemptEnd::RetryableFailure {
        error: "timeout".into(),
    };
    assert_eq!(
        summary(&finished.attempts),
        [
            (
                1,
                "w-1".into(),
                Some(AttemptOutcome::WithoutResult(retryable))
            ),
            (
                2,
                "w-2".into(),
                Some(AttemptOutcome::Finished {
                    status: TaskStatus::Completed,
                    message: Some("done".into()),
                })
            ),
        ]
    );
    assert!(finished.attempts.iter().all(|r| r.ended_at.is_some()));
    check_times(&finished.attempts);
    assert_eq!(finished.attempts_dropped, 0);

    // Given back at shutdown (the attempt does not count: the next is
    // attempt 1 again), then cancelled while running; a failed result.
    let other = dispatched(&stores.store, Some(3)).await;
    let lease = claim(&stores, &other, 1, "w-3").await;
    stores
        .execution
        .release(&tenant(), &other, &lease, ReleaseReason::Shutdown, "bye")
        .await
        .expect("release");
    claim(&stores, &other, 2, "w-4").await;
    stores
        .store
        .cancel_task(&all(), &other)
        .await
        .expect("cancel");
    let failed = dispatched(&stores.store, Some(3)).await;
    let lease = claim(&stores, &failed, 1, "w-5").await;
    stores
        .store
        .store_result(
            &all(),
            &failed,
            NewResult {
                status: ResultStatus::Failed,
                ..result(&lease)
            },
        )
        .await
        .expect("result");
    assert_eq!(
        summary(&details(&stores, &other).await.attempts),
        [
            (
                1,
                "w-3".into(),
                Some(AttemptOutcome::WithoutResult(AttemptEnd::Shutdown))
            ),
            (
                1,
                "w-4".into(),
                Some(AttemptOutcome::Finished {
                    status: TaskStatus::Cancelled,
                    message: None,
                })
            ),
        ]
    );
    assert_eq!(
        summary(&details(&stores, &failed).await.attempts),
        [(
            1,
            "w-5".into(),
            Some(AttemptOutcome::Finished {
                status: TaskStatus::Failed,
                message: None,
            })
        )]
    );
}

pub async fn a_lapsed_lease_is_recorded_as_such(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&stores.store, Some(2)).await;
    claim(&stores, &id, 1, "w-frozen").await;
    // A task held by its caller's own process, whose holder stops too.
    let held = create(&stores.store, &all()).await.task_id;
    let holder = Holder::parse("sdk server (pid 7)").expect("holder");
    match stores.store.hold_task(&all(), &held, &holder, None).await {
        Ok(HoldOutcome::Held { .. }) => {}
        other => panic!("expected a hold, got {other:?}"),
    }
    let_leases_expire().await;
    assert_eq!(
        stores.dispatch.reap_expired_leases().await.expect("reap"),
        2
    );
    claim(&stores, &id, 2, "w-next").await;
    let lapsed = Some(AttemptOutcome::WithoutResult(AttemptEnd::LeaseExpired));
    let retried = details(&stores, &id).await;
    assert_eq!(
        summary(&retried.attempts),
        [
            (1, "w-frozen".into(), lapsed.clone()),
            (2, "w-next".into(), None)
        ]
    );
    check_times(&retried.attempts);
    let lost = details(&stores, &held).await;
    assert_eq!(lost.task.status, TaskStatus::Failed);
    assert_eq!(
        summary(&lost.attempts),
        [(1, "sdk server (pid 7)".into(), lapsed)]
    );
}

pub async fn the_newest_attempts_are_kept_and_the_dropped_counted(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let id = dispatched(&stores.store, Some(1)).await;
    let extra = 5;
    let total = MAX_ATTEMPT_RECORDS + extra;
    // Given back at shutdown each time: the attempt does not count, so the
    // one attempt allowed can be claimed any number of times.
    for n in 1..=total {
        let lease = claim(&stores, &id, n as u64, &format!("w-{n}")).await;
        stores
            .execution
            .release(&tenant(), &id, &lease, ReleaseReason::Shutdown, "")
            .await
            .expect("release");
    }
    let kept = details(&stores, &id).await;
    assert_eq!(kept.attempts.len(), MAX_ATTEMPT_RECORDS);
    assert_eq!(kept.attempts_dropped, extra as u64);
    let workers: Vec<String> = kept.attempts.iter().map(|r| r.worker.clone()).collect();
    let newest: Vec<String> = (extra + 1..=total).map(|n| format!("w-{n}")).collect();
    assert_eq!(workers, newest, "the oldest are dropped");
    assert!(kept.attempts.iter().all(|r| r.end.is_some()));
    check_times(&kept.attempts);
}

pub async fn a_tasks_history_goes_with_it(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let short = |id: &str| NewTask {
        ttl: Some(ttl(300)).into(),
        ..named(id, dispatched_to("echo", Some(3)))
    };
    let id = stores
        .store
        .create_task(&all(), short("remembered"))
        .await
        .expect("create")
        .task_id;
    let lease = claim(&stores, &id, 1, "w-1").await;
    stores
        .store
        .store_result(&all(), &id, result(&lease))
        .await
        .expect("result");
    assert_eq!(details(&stores, &id).await.attempts.len(), 1);
    sleep_ms(500).await;
    assert_err!(
        stores.insights.task_details(&tenant(), &id).await,
        StoreError::NotFound
    );
    // The id of the expired task, reused before any sweep: a new task, with
    // no attempt of the old one's.
    let again = stores
        .store
        .create_task(&all(), short("remembered"))
        .await
        .expect("create again");
    let fresh = details(&stores, &again.task_id).await;
    assert!(fresh.attempts.is_empty(), "{:?}", fresh.attempts);
    assert_eq!(fresh.attempts_dropped, 0);

    stores
        .store
        .delete_task(&all(), &again.task_id)
        .await
        .expect("delete");
    assert_err!(
        stores
            .insights
            .task_details(&tenant(), &again.task_id)
            .await,
        StoreError::NotFound
    );
}
