//! WatchTask and the waiting GetTaskResult (MCP `tasks/result`).

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::TaskStatus;
use taskstore::store::StoreConfig;
use tokio_stream::StreamExt;

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn watch_streams_every_change_until_terminal(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let mut watch = store
        .watch_task(&all(), &task.task_id)
        .await
        .expect("watch");
    let first = watch.next().await.expect("an item").expect("the task");
    assert_eq!(first, task);

    let writer = {
        let (store, id) = (store.clone(), task.task_id.clone());
        tokio::spawn(async move {
            for (next, message) in [
                (TaskStatus::Working, Some("halfway")),
                (TaskStatus::InputRequired, Some("need input")),
                (TaskStatus::Working, None),
            ] {
                sleep_ms(150).await;
                store
                    .update_status(&all(), &id, status(next, message))
                    .await
                    .expect("update");
            }
            sleep_ms(150).await;
            store
                .store_result(&all(), &id, completed(r#"{"done":1}"#))
                .await
                .expect("store")
        })
    };
    let mut seen = Vec::new();
    let deadline = Duration::from_secs(10);
    while let Some(item) = tokio::time::timeout(deadline, watch.next())
        .await
        .expect("no stall")
    {
        seen.push(item.expect("a task"));
    }
    let stored = writer.await.expect("writer");
    let steps: Vec<_> = seen
        .iter()
        .map(|t| (t.status, t.status_message.clone()))
        .collect();
    assert_eq!(
        steps,
        [
            (TaskStatus::Working, Some("halfway".to_owned())),
            (TaskStatus::InputRequired, Some("need input".to_owned())),
            (TaskStatus::Working, None),
            (TaskStatus::Completed, None),
        ],
        "every change, in order, and the stream ends at the terminal status"
    );
    assert_eq!(seen.last(), Some(&stored));
}

pub async fn watch_of_a_terminal_task_ends_at_once(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let cancelled = store
        .cancel_task(&all(), &task.task_id)
        .await
        .expect("cancel");
    let items: Vec<_> = store
        .watch_task(&all(), &task.task_id)
        .await
        .expect("watch")
        .collect()
        .await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().expect("the task"), &cancelled);
    let missing = TaskId::parse("missing").expect("id");
    assert_err!(
        store.watch_task(&all(), &missing).await.map(|_| ()),
        StoreError::NotFound
    );
    assert_err!(
        store
            .watch_task(&session("other"), &task.task_id)
            .await
            .map(|_| ()),
        StoreError::NotFound
    );
}

pub async fn waiting_for_a_result_wakes_when_it_is_stored(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let waiter = {
        let (store, id) = (store.clone(), task.task_id.clone());
        tokio::spawn(async move {
            store
                .wait_for_result(&all(), &id, Duration::from_secs(30))
                .await
        })
    };
    sleep_ms(300).await;
    assert!(!waiter.is_finished(), "it waits while the task works");
    store
        .store_result(&all(), &task.task_id, completed(r#"{"answer":42}"#))
        .await
        .expect("store");
    let result = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken well before its timeout")
        .expect("waiter")
        .expect("the result");
    assert_eq!(result.result.as_str(), r#"{"answer":42}"#);

    let cancelled = create(&store, &all()).await;
    let waiter = {
        let (store, id) = (store.clone(), cancelled.task_id.clone());
        tokio::spawn(async move {
            store
                .wait_for_result(&all(), &id, Duration::from_secs(30))
                .await
        })
    };
    sleep_ms(100).await;
    store
        .cancel_task(&all(), &cancelled.task_id)
        .await
        .expect("cancel");
    let outcome = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken")
        .expect("waiter");
    assert_err!(outcome, StoreError::FailedPrecondition(_));
}

pub async fn waiting_for_a_result_gives_up_at_its_timeout(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        store.wait_for_result(&all(), &task.task_id, Duration::from_millis(300)),
    )
    .await
    .expect("bounded by its timeout");
    assert_err!(outcome, StoreError::FailedPrecondition(_));
    let missing = TaskId::parse("missing").expect("id");
    assert_err!(
        store
            .wait_for_result(&all(), &missing, Duration::from_secs(5))
            .await,
        StoreError::NotFound
    );
}
