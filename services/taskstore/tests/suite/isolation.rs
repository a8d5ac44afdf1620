//! Sessions and tenants.

use taskstore::StoreError;
use taskstore::domain::{Scope, TaskStatus, TenantId};
use taskstore::store::StoreConfig;

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn other_sessions_tasks_are_not_found(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &session("alice")).await;
    let id = &task.task_id;
    let missing_message = err_message(
        store
            .get_task(&all(), &TaskId::parse("missing").expect("id"))
            .await,
    );

    let other = session("mallory");
    assert_eq!(
        err_message(store.get_task(&other, id).await),
        missing_message,
        "no existence leak"
    );
    assert_err!(
        store
            .update_status(&other, id, status(TaskStatus::Failed, None))
            .await,
        StoreError::NotFound
    );
    assert_err!(
        store.store_result(&other, id, completed("{}")).await,
        StoreError::NotFound
    );
    assert_err!(store.get_result(&other, id).await, StoreError::NotFound);
    assert_err!(store.cancel_task(&other, id).await, StoreError::NotFound);
    assert!(list_all(&store, &other, 10).await.is_empty());
    // Nothing changed, and the owner and the tenant-wide view still see it.
    assert_eq!(
        store.get_task(&session("alice"), id).await.expect("owner"),
        task
    );
    assert_eq!(store.get_task(&all(), id).await.expect("tenant-wide"), task);
    assert_eq!(
        ids(&list_all(&store, &session("alice"), 10).await),
        ids(std::slice::from_ref(&task))
    );
}

pub async fn tenants_never_see_each_other(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let acme = Scope {
        tenant: TenantId::parse("acme").expect("tenant"),
        session: None,
    };
    if !backend.chooses_tenant() {
        // Over gRPC the tenant comes from the server, never from the caller.
        assert_err!(
            store.create_task(&acme, new_task()).await,
            StoreError::InvalidArgument(_)
        );
        return;
    }
    let globex = Scope {
        tenant: TenantId::parse("globex").expect("tenant"),
        session: None,
    };
    let task = store
        .create_task(&acme, task_with_id("shared-name"))
        .await
        .expect("create");
    // The same id is free in another tenant: the key is (tenant, task id).
    let theirs = store
        .create_task(&globex, task_with_id("shared-name"))
        .await
        .expect("create");
    assert_ne!(task.created_at, theirs.created_at);
    store
        .cancel_task(&globex, &theirs.task_id)
        .await
        .expect("cancel theirs");
    assert_eq!(
        store.get_task(&acme, &task.task_id).await.expect("ours"),
        task
    );
    assert_err!(
        store.get_task(&all(), &task.task_id).await,
        StoreError::NotFound
    );
    assert_eq!(list_all(&store, &acme, 10).await.len(), 1);
    assert!(list_all(&store, &all(), 10).await.is_empty());
}
