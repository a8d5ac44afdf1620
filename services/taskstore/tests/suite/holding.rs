//! Tasks held by their caller (HoldTask): an MCP SDK server running a tool
//! in its own process holds its task with a lease, and a holder that dies
//! leaves the task failed, saying so, not working until its ttl.

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{HoldOutcome, HoldRefusal, Holder, LeaseToken, StopReason, TaskStatus};
use taskstore::error::Refusal;

use super::*;
use crate::common::{Backend, Stores};

fn holder() -> Holder {
    Holder::parse("mcp server files (pid 42)").expect("holder")
}

fn held(outcome: Result<HoldOutcome, StoreError>) -> LeaseToken {
    match outcome {
        Ok(HoldOutcome::Held { lease, duration }) => {
            assert!(duration > Duration::ZERO);
            lease
        }
        other => panic!("expected a hold, got {other:?}"),
    }
}

pub async fn a_held_task_fails_when_its_holder_stops_renewing(backend: &dyn Backend) {
    let Stores {
        store, dispatch, ..
    } = backend.stores(with_policy(short_leases())).await;
    let task = create(&store, &all()).await;
    let lease = held(
        store
            .hold_task(&all(), &task.task_id, &holder(), None)
            .await,
    );
    let running = store.get_task(&all(), &task.task_id).await.expect("get");
    assert_eq!(
        running.status_message.as_deref(),
        Some("running on mcp server files (pid 42) (attempt 1 of 1)")
    );
    // Renewed, it lives past its lease.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let renewed = held(
            store
                .hold_task(&all(), &task.task_id, &holder(), Some(&lease))
                .await,
        );
        assert_eq!(renewed, lease, "the same lease, extended");
        assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 0);
    }
    // The holder's report is fenced by its lease.
    store
        .update_status(
            &all(),
            &task.task_id,
            StatusUpdate {
                lease: Some(lease.clone()),
                ..status(TaskStatus::Working, Some("halfway"))
            },
        )
        .await
        .expect("the holder reports");
    // Its process dies: the lease lapses, the reaper fails the task.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);
    let failed = store.get_task(&all(), &task.task_id).await.expect("get");
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(
        failed.status_message.as_deref(),
        Some(
            "failed: the process running it (mcp server files (pid 42)) stopped renewing its lease (it stopped, or lost its connection)"
        )
    );
    // A holder that comes back is told to stop, and its result is refused.
    assert_eq!(
        store
            .hold_task(&all(), &task.task_id, &holder(), Some(&lease))
            .await,
        Ok(HoldOutcome::Stop(StopReason::Finished))
    );
    assert!(matches!(
        store
            .store_result(
                &all(),
                &task.task_id,
                NewResult {
                    lease: Some(lease),
                    ..completed(r#"{"content":[]}"#)
                }
            )
            .await,
        Err(StoreError::FailedPrecondition(_))
    ));
}

pub async fn holds_are_refused_where_they_do_not_belong(backend: &dyn Backend) {
    let Stores { store, .. } = backend.stores(with_policy(short_leases())).await;
    let refused = |outcome: Result<HoldOutcome, StoreError>| match outcome {
        Err(StoreError::FailedPrecondition(Refusal::Hold(refusal))) => refusal,
        other => panic!("expected a refused hold, got {other:?}"),
    };
    // Dispatched to the fleet: its workers run it.
    let fleet = dispatched(&store, None).await;
    assert_eq!(
        refused(store.hold_task(&all(), &fleet, &holder(), None).await),
        HoldRefusal::Dispatched
    );
    // Held already: a second holder is refused, a forged renewal told to stop.
    let task = create(&store, &all()).await;
    held(
        store
            .hold_task(&all(), &task.task_id, &holder(), None)
            .await,
    );
    assert_eq!(
        refused(
            store
                .hold_task(&all(), &task.task_id, &holder(), None)
                .await
        ),
        HoldRefusal::HeldByAnother
    );
    let forged = LeaseToken::parse("forged").expect("token");
    assert_eq!(
        store
            .hold_task(&all(), &task.task_id, &holder(), Some(&forged))
            .await,
        Ok(HoldOutcome::Stop(StopReason::LeaseLost))
    );
    // Ended: nothing to hold.
    let ended = create(&store, &all()).await;
    store
        .cancel_task(&all(), &ended.task_id)
        .await
        .expect("cancel");
    assert_eq!(
        refused(
            store
                .hold_task(&all(), &ended.task_id, &holder(), None)
                .await
        ),
        HoldRefusal::Ended(TaskStatus::Cancelled)
    );
    // Another session's, or none: not found.
    let private = create(&store, &session("a")).await;
    assert!(matches!(
        store
            .hold_task(&session("b"), &private.task_id, &holder(), None)
            .await,
        Err(StoreError::NotFound)
    ));
    // A cancel reaches the holder at its next renewal.
    let cancelled = create(&store, &all()).await;
    let lease = held(
        store
            .hold_task(&all(), &cancelled.task_id, &holder(), None)
            .await,
    );
    store
        .cancel_task(&all(), &cancelled.task_id)
        .await
        .expect("cancel");
    assert_eq!(
        store
            .hold_task(&all(), &cancelled.task_id, &holder(), Some(&lease))
            .await,
        Ok(HoldOutcome::Stop(StopReason::Cancelled))
    );
}
