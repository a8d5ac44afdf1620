//! TTL: expired tasks vanish at once; cleanup only reclaims space.

use taskstore::StoreError;
use taskstore::domain::{PageRequest, TaskStatus};
use taskstore::store::StoreConfig;

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn expired_tasks_are_not_found_anywhere(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let keeper = create(&store, &session("s1")).await;
    let doomed = store
        .create_task(&session("s1"), task_with_ttl(200))
        .await
        .expect("create");
    assert!(store.get_task(&all(), &doomed.task_id).await.is_ok());
    sleep_ms(400).await;

    let id = &doomed.task_id;
    for scope in [all(), session("s1")] {
        assert_err!(store.get_task(&scope, id).await, StoreError::NotFound);
        assert_err!(
            store
                .update_status(&scope, id, status(TaskStatus::Working, None))
                .await,
            StoreError::NotFound
        );
        assert_err!(
            store.store_result(&scope, id, completed("{}")).await,
            StoreError::NotFound
        );
        assert_err!(store.get_result(&scope, id).await, StoreError::NotFound);
        assert_err!(store.cancel_task(&scope, id).await, StoreError::NotFound);
        assert_eq!(
            ids(&list_all(&store, &scope, 10).await),
            ids(std::slice::from_ref(&keeper))
        );
    }
}

pub async fn reaching_a_terminal_status_extends_expiry(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let finished = store
        .create_task(&all(), task_with_ttl(1000))
        .await
        .expect("create");
    let unfinished = store
        .create_task(&all(), task_with_ttl(1000))
        .await
        .expect("create");
    sleep_ms(600).await;
    store
        .store_result(&all(), &finished.task_id, completed(r#"{"ok":1}"#))
        .await
        .expect("store");
    // Past created_at + ttl: the unfinished task is gone, the finished one is
    // kept for a ttl after its result was stored.
    sleep_ms(700).await;
    assert_err!(
        store.get_task(&all(), &unfinished.task_id).await,
        StoreError::NotFound
    );
    let result = store
        .get_result(&all(), &finished.task_id)
        .await
        .expect("result still there");
    assert_eq!(result.result.as_str(), r#"{"ok":1}"#);
    sleep_ms(700).await;
    assert_err!(
        store.get_task(&all(), &finished.task_id).await,
        StoreError::NotFound
    );
}

pub async fn cleanup_deletes_only_expired_tasks(backend: &dyn Backend) {
    let store = backend
        .store(StoreConfig {
            cleanup_batch_size: 2,
            ..StoreConfig::default()
        })
        .await;
    let mut lasting = Vec::new();
    for i in 0..7 {
        if i < 5 {
            store
                .create_task(&all(), task_with_ttl(100))
                .await
                .expect("create");
        } else {
            lasting.push(create(&store, &all()).await);
        }
    }
    sleep_ms(300).await;
    assert_eq!(store.cleanup_expired().await.expect("cleanup"), 5);
    assert_eq!(store.cleanup_expired().await.expect("cleanup again"), 0);
    let listed = store
        .list_tasks(&all(), PageRequest::default())
        .await
        .expect("list");
    assert_eq!(ids(&listed.tasks), ids(&lasting));
}

pub async fn concurrent_cleanups_split_the_work(backend: &dyn Backend) {
    let store = backend
        .store(StoreConfig {
            cleanup_batch_size: 3,
            ..StoreConfig::default()
        })
        .await;
    for _ in 0..40 {
        store
            .create_task(&all(), task_with_ttl(100))
            .await
            .expect("create");
    }
    sleep_ms(300).await;
    let mut cleanups = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let store = store.clone();
        cleanups.spawn(async move { store.cleanup_expired().await.expect("cleanup") });
    }
    let total: u64 = cleanups.join_all().await.into_iter().sum();
    assert_eq!(total, 40, "every expired task deleted exactly once");
}
