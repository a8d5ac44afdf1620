//! Idempotent creates: one key, one task, whoever retries and however the
//! retries race; a key never hands a caller another call's task.

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{IdempotencyKey, JsonObject, NewTask, Scope, StartTime, TenantId};
use taskstore::error::Refusal;
use taskstore::store::{Quotas, StoreConfig};
use tokio::task::JoinSet;

use super::start_times::starting;
use super::*;
use crate::assert_err;
use crate::common::Backend;

const RETRIES: usize = 50;

fn keyed(key: &str, task: NewTask) -> NewTask {
    NewTask {
        idempotency_key: Some(IdempotencyKey::parse(key).expect("key")),
        ..task
    }
}

/// The same `tools/call` of `echo` with other arguments.
fn other_arguments() -> NewTask {
    NewTask {
        request: JsonObject::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"ho"}}}"#,
        )
        .expect("request"),
        ..new_task()
    }
}

/// A retry of [`new_task`]'s call: another JSON-RPC id, a progress token.
fn retried() -> NewTask {
    NewTask {
        request_id: taskstore::domain::RequestId::parse("8").expect("id"),
        request: JsonObject::parse(
            r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"progressToken":"p"}}}"#,
        )
        .expect("request"),
        ..new_task()
    }
}

fn in_use<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert_err!(
        result,
        StoreError::FailedPrecondition(Refusal::IdempotencyKeyInUse)
    );
}

pub async fn concurrent_creates_with_one_key_make_one_task(backend: &dyn Backend) {
    let store = backend.store(with_policy(short_leases())).await;
    let mut creates = JoinSet::new();
    for n in 0..RETRIES {
        let store = store.clone();
        let task = if n % 2 == 0 { new_task() } else { retried() };
        let task = NewTask {
            dispatch: Some(taskstore::domain::DispatchRequest {
                fairness: None,
                rate: None,
                concurrency: None,
                priority: Default::default(),
                retry: Default::default(),
                start: None,
                tool: taskstore::domain::ToolName::parse("echo").expect("tool"),
                max_attempts: None,
            }),
            ..keyed("order-7", task)
        };
        creates.spawn(async move { store.create_task(&all(), task).await });
    }
    let outcomes: Vec<_> = creates
        .join_all()
        .await
        .into_iter()
        .map(|outcome| outcome.expect("every retry is answered with the task"))
        .collect();
    let first = &outcomes[0].task_id;
    assert!(outcomes.iter().all(|task| &task.task_id == first));
    assert_eq!(
        ids(&list_all(&store, &all(), 100).await),
        vec![first.to_string()]
    );

    // Later, a retry gets the task as it is now.
    store.cancel_task(&all(), first).await.expect("cancel");
    let again = store
        .create_task(&all(), keyed("order-7", new_task()))
        .await
        .expect("a late retry");
    assert_eq!(&again.task_id, first);
    assert_eq!(again.status, TaskStatus::Cancelled);
    // A create without the key is another task.
    let unkeyed = create(&store, &all()).await;
    assert_ne!(&unkeyed.task_id, first);
}

pub async fn a_key_never_hands_over_another_calls_task(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let alice = session("alice");
    let task = store
        .create_task(&alice, keyed("k", new_task()))
        .await
        .expect("create");
    let before = list_all(&store, &all(), 100).await;

    in_use(
        store
            .create_task(&alice, keyed("k", other_arguments()))
            .await,
    );
    // Another session's retry with the key does not see alice's task.
    in_use(
        store
            .create_task(&session("bob"), keyed("k", new_task()))
            .await,
    );
    // The refusals did not spend the key: alice's retry still gets her task.
    assert_eq!(
        store
            .create_task(&alice, keyed("k", new_task()))
            .await
            .expect("alice's retry")
            .task_id,
        task.task_id
    );
    // Refusals changed nothing.
    assert_eq!(list_all(&store, &all(), 100).await, before);

    if backend.chooses_tenant() {
        // Keys are per tenant: another tenant's "k" is its own.
        let globex = Scope {
            tenant: TenantId::parse("globex").expect("tenant"),
            session: None,
        };
        let theirs = store
            .create_task(&globex, keyed("k", new_task()))
            .await
            .expect("another tenant's key");
        assert_ne!(theirs.task_id, task.task_id);
    }
}

pub async fn a_key_is_freed_by_its_retention_and_by_its_tasks_end(backend: &dyn Backend) {
    let store = backend
        .store(StoreConfig {
            // Long enough for the retry below on a loaded machine.
            idempotency_retention: Duration::from_millis(1500),
            ..StoreConfig::default()
        })
        .await;
    let first = store
        .create_task(&all(), keyed("k", new_task()))
        .await
        .expect("create");
    sleep_ms(1700).await;
    // Past its retention the key is free, for another call too.
    let second = store
        .create_task(&all(), keyed("k", other_arguments()))
        .await
        .expect("the key is free again");
    assert_ne!(second.task_id, first.task_id);
    assert_eq!(
        store
            .create_task(&all(), keyed("k", other_arguments()))
            .await
            .expect("retry")
            .task_id,
        second.task_id
    );
    // A deleted task lets go of its key at once.
    store
        .delete_task(&all(), &second.task_id)
        .await
        .expect("delete");
    let third = store
        .create_task(&all(), keyed("k", new_task()))
        .await
        .expect("create after delete");
    assert_ne!(third.task_id, second.task_id);
    // So does an expired one, swept away or not.
    let short = store
        .create_task(&all(), keyed("short", task_with_ttl(100)))
        .await
        .expect("create");
    sleep_ms(200).await;
    let after = store
        .create_task(&all(), keyed("short", new_task()))
        .await
        .expect("create after expiry");
    assert_ne!(after.task_id, short.task_id);
}

/// A retry creates nothing, so what would refuse a create does not refuse
/// it: a quota reached, or a start time that has passed since.
pub async fn a_retry_is_answered_whatever_would_refuse_a_create(backend: &dyn Backend) {
    let store = backend
        .store(StoreConfig {
            quotas: Quotas {
                dispatch_weight: None,
                max_priority: None,
                max_tasks: Some(1),
                max_tasks_per_session: None,
            },
            ..StoreConfig::default()
        })
        .await;
    let task = store
        .create_task(&all(), keyed("k", new_task()))
        .await
        .expect("create");
    let again = store
        .create_task(&all(), keyed("k", retried()))
        .await
        .expect("a retry creates nothing, so no quota refuses it");
    assert_eq!(again.task_id, task.task_id);
    assert_err!(
        store.create_task(&all(), keyed("k2", new_task())).await,
        StoreError::ResourceExhausted(_)
    );
    store
        .delete_task(&all(), &task.task_id)
        .await
        .expect("delete");

    let starting = |at| keyed("later", starting(StartTime::At(at)));
    let scheduled = store
        .create_task(
            &all(),
            starting(chrono::Utc::now() + chrono::TimeDelta::hours(1)),
        )
        .await
        .expect("create");
    let retried = store
        .create_task(
            &all(),
            starting(chrono::Utc::now() - chrono::TimeDelta::hours(1)),
        )
        .await
        .expect("a retry whose start has passed");
    assert_eq!(retried.task_id, scheduled.task_id);
}
