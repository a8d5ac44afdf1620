//! DeleteTask: a task goes at once with its result and its jobs, whatever
//! its status; only where it is visible; watchers learn it is gone.

use std::time::Duration;

use taskstore::StoreError;
use tokio_stream::StreamExt;

use super::*;
use crate::assert_err;
use crate::common::{Backend, Stores};

/// A completed task with a result, under `id`.
async fn finished(store: &Store, id: &str) -> TaskId {
    let task = store
        .create_task(&all(), task_with_id(id))
        .await
        .expect("create");
    store
        .store_result(&all(), &task.task_id, completed(r#"{"content":[]}"#))
        .await
        .expect("store");
    task.task_id
}

pub async fn deletes_a_task_whatever_its_status(backend: &dyn Backend) {
    let store = backend
        .store(taskstore::store::StoreConfig::default())
        .await;
    let working = store
        .create_task(&all(), task_with_id("working"))
        .await
        .expect("create");
    let done = finished(&store, "done").await;
    for id in [&working.task_id, &done] {
        store.delete_task(&all(), id).await.expect("delete");
        assert_err!(store.get_task(&all(), id).await, StoreError::NotFound);
        assert_err!(store.get_result(&all(), id).await, StoreError::NotFound);
        assert_err!(store.cancel_task(&all(), id).await, StoreError::NotFound);
        assert_err!(store.delete_task(&all(), id).await, StoreError::NotFound);
    }
    assert!(list_all(&store, &all(), 10).await.is_empty());
    // The id is free again.
    store
        .create_task(&all(), task_with_id("working"))
        .await
        .expect("the id is reused");
}

pub async fn deletes_only_what_the_caller_sees(backend: &dyn Backend) {
    let store = backend
        .store(taskstore::store::StoreConfig::default())
        .await;
    let mine = store
        .create_task(&session("mine"), new_task())
        .await
        .expect("create");
    assert_err!(
        store.delete_task(&session("theirs"), &mine.task_id).await,
        StoreError::NotFound
    );
    // Over gRPC the tenant comes from the caller's identity (the security
    // probe covers it there).
    if backend.chooses_tenant() {
        let other_tenant = Scope {
            tenant: TenantId::parse("elsewhere").expect("tenant"),
            session: None,
        };
        assert_err!(
            store.delete_task(&other_tenant, &mine.task_id).await,
            StoreError::NotFound
        );
    }
    assert_err!(
        store
            .delete_task(&all(), &TaskId::parse("never-was").expect("id"))
            .await,
        StoreError::NotFound
    );
    assert_eq!(
        store
            .get_task(&session("mine"), &mine.task_id)
            .await
            .expect("still there"),
        mine
    );
    store
        .delete_task(&session("mine"), &mine.task_id)
        .await
        .expect("its own session deletes it");
}

pub async fn a_watcher_learns_that_its_task_was_deleted(backend: &dyn Backend) {
    let store = backend
        .store(taskstore::store::StoreConfig::default())
        .await;
    let task = create(&store, &all()).await;
    let mut watch = store
        .watch_task(&all(), &task.task_id)
        .await
        .expect("watch");
    assert_eq!(watch.next().await.expect("first").expect("task"), task);
    store
        .delete_task(&all(), &task.task_id)
        .await
        .expect("delete");
    let gone = tokio::time::timeout(Duration::from_secs(3), watch.next())
        .await
        .expect("told within moments");
    assert!(matches!(gone, Some(Err(StoreError::NotFound))), "{gone:?}");
}

pub async fn a_deleted_task_leaves_no_job_to_run(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let id = dispatched(&store, None).await;
    store.delete_task(&all(), &id).await.expect("delete");
    let queue = crate::common::recorder::Recorder {
        routable: true,
        ..Default::default()
    };
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        0,
        "its job went with it"
    );
    assert_err!(
        execution.claim(&tenant(), &id, 1, "w").await,
        StoreError::NotFound
    );
}
