//! Quotas and races: outcomes decided by the store, never by luck.

use taskstore::StoreError;
use taskstore::domain::{NewResult, ResultStatus, TaskStatus};
use taskstore::store::{Quotas, StoreConfig};
use tokio::task::JoinSet;

use super::*;
use crate::common::Backend;

const CONCURRENT_CREATES: usize = 50;

/// Runs `CONCURRENT_CREATES` creates in `scope` at once; returns how many
/// succeeded and the quota errors of the rest.
async fn create_concurrently(store: &Store, scope: Scope) -> (usize, Vec<String>) {
    let mut creates = JoinSet::new();
    for _ in 0..CONCURRENT_CREATES {
        let (store, scope) = (store.clone(), scope.clone());
        creates.spawn(async move { store.create_task(&scope, new_task()).await });
    }
    let mut created = 0;
    let mut refused = Vec::new();
    for result in creates.join_all().await {
        match result {
            Ok(_) => created += 1,
            Err(StoreError::ResourceExhausted(message)) => refused.push(message),
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    (created, refused)
}

pub async fn max_tasks_holds_under_concurrent_creates(backend: &dyn Backend) {
    let quotas = Quotas {
        dispatch_weight: None,
        max_priority: None,
        max_tasks: Some(10),
        max_tasks_per_session: None,
    };
    let store = backend
        .store(StoreConfig {
            quotas,
            ..StoreConfig::default()
        })
        .await;
    let (created, refused) = create_concurrently(&store, all()).await;
    assert_eq!(created, 10);
    assert_eq!(refused.len(), CONCURRENT_CREATES - 10);
    assert!(
        refused.iter().all(|m| m.contains("max_tasks")),
        "{refused:?}"
    );
    assert_eq!(list_all(&store, &all(), 100).await.len(), 10);
}

pub async fn max_tasks_per_session_holds_under_concurrent_creates(backend: &dyn Backend) {
    let quotas = Quotas {
        dispatch_weight: None,
        max_priority: None,
        max_tasks: None,
        max_tasks_per_session: Some(5),
    };
    let store = backend
        .store(StoreConfig {
            quotas,
            ..StoreConfig::default()
        })
        .await;
    let (created, refused) = create_concurrently(&store, session("busy")).await;
    assert_eq!(created, 5);
    assert!(
        refused.iter().all(|m| m.contains("max_tasks_per_session")),
        "{refused:?}"
    );
    // Other sessions, and tasks without one, are not held back.
    create(&store, &session("quiet")).await;
    create(&store, &all()).await;
    assert_eq!(list_all(&store, &session("busy"), 100).await.len(), 5);
}

pub async fn quotas_count_unexpired_tasks_only(backend: &dyn Backend) {
    let quotas = Quotas {
        dispatch_weight: None,
        max_priority: None,
        max_tasks: Some(2),
        max_tasks_per_session: Some(1),
    };
    let store = backend
        .store(StoreConfig {
            quotas,
            ..StoreConfig::default()
        })
        .await;
    store
        .create_task(&session("s"), task_with_ttl(200))
        .await
        .expect("first");
    store
        .create_task(&all(), task_with_ttl(200))
        .await
        .expect("second");
    match store.create_task(&all(), new_task()).await {
        Err(StoreError::ResourceExhausted(message)) => assert!(message.contains("max_tasks")),
        other => panic!("expected the tenant quota, got {other:?}"),
    }
    sleep_ms(400).await;
    store
        .create_task(&session("s"), new_task())
        .await
        .expect("room again in the session");
    store
        .create_task(&all(), new_task())
        .await
        .expect("room again in the tenant");
}

pub async fn exactly_one_of_concurrent_results_wins(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let mut stores = JoinSet::new();
    for i in 0..20 {
        let (store, id) = (store.clone(), task.task_id.clone());
        stores.spawn(async move {
            let result = NewResult {
                status: if i % 2 == 0 {
                    ResultStatus::Completed
                } else {
                    ResultStatus::Failed
                },
                ..completed(&format!(r#"{{"writer":{i}}}"#))
            };
            (i, store.store_result(&all(), &id, result).await)
        });
    }
    let mut winners = Vec::new();
    for (i, outcome) in stores.join_all().await {
        match outcome {
            Ok(_) => winners.push(i),
            Err(StoreError::FailedPrecondition(_)) => {}
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one writer wins");
    let result = store
        .get_result(&all(), &task.task_id)
        .await
        .expect("result");
    assert_eq!(
        result.result.as_str(),
        format!(r#"{{"writer":{}}}"#, winners[0])
    );
}

pub async fn cancel_racing_a_result_has_one_outcome(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    for _ in 0..15 {
        let task = create(&store, &all()).await;
        let cancel = {
            let (store, id) = (store.clone(), task.task_id.clone());
            tokio::spawn(async move { store.cancel_task(&all(), &id).await })
        };
        let stored = store
            .store_result(&all(), &task.task_id, completed(r#"{"raced":true}"#))
            .await;
        let cancelled = cancel
            .await
            .expect("cancel task")
            .expect("cancel never fails here");
        let now = store.get_task(&all(), &task.task_id).await.expect("get");
        match stored {
            Ok(stored) => {
                // The result won: cancel found a terminal task and left it.
                assert_eq!(now.status, TaskStatus::Completed);
                assert_eq!(cancelled, now);
                assert_eq!(stored, now);
                assert!(store.get_result(&all(), &task.task_id).await.is_ok());
            }
            Err(StoreError::FailedPrecondition(_)) => {
                assert_eq!(now.status, TaskStatus::Cancelled);
                assert_eq!(cancelled, now);
                assert!(store.get_result(&all(), &task.task_id).await.is_err());
            }
            Err(other) => panic!("unexpected error: {other:?}"),
        }
    }
}

pub async fn concurrent_creates_of_one_id_have_one_winner(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut creates = JoinSet::new();
    for _ in 0..60 {
        let store = store.clone();
        creates.spawn(async move { store.create_task(&all(), task_with_id("contested")).await });
    }
    // Unrelated creates at the same time share batches with the contested ones.
    for _ in 0..60 {
        let store = store.clone();
        creates.spawn(async move { store.create_task(&all(), new_task()).await });
    }
    let outcomes = creates.join_all().await;
    let contested: Vec<_> = outcomes
        .iter()
        .filter(|o| !matches!(o, Ok(task) if task.task_id.as_str() != "contested"))
        .collect();
    let winners = contested.iter().filter(|o| o.is_ok()).count();
    assert_eq!(winners, 1, "{contested:?}");
    assert!(
        contested
            .iter()
            .filter(|o| o.is_err())
            .all(|o| matches!(o, Err(StoreError::AlreadyExists(_)))),
        "{contested:?}"
    );
    assert_eq!(list_all(&store, &all(), 100).await.len(), 61);
}

/// Progress reports racing on one task all land (none is mistaken for a
/// refusal because another change of the task was applied beside it), and
/// a result racing them ends the task once.
pub async fn concurrent_progress_reports_on_one_task_all_land(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let mut reports = tokio::task::JoinSet::new();
    for n in 0..20 {
        let (store, id) = (store.clone(), task.task_id.clone());
        reports.spawn(async move {
            store
                .update_status(
                    &all(),
                    &id,
                    status(TaskStatus::Working, Some(&format!("step {n}"))),
                )
                .await
        });
    }
    for outcome in reports.join_all().await {
        outcome.expect("every progress report lands");
    }
    let done = store
        .store_result(&all(), &task.task_id, completed(r#"{"content":[]}"#))
        .await
        .expect("the result lands after them");
    assert_eq!(done.status, TaskStatus::Completed);
}
