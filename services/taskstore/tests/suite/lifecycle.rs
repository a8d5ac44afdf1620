//! UpdateTaskStatus, StoreTaskResult, GetTaskResult and CancelTask.

use taskstore::StoreError;
use taskstore::domain::{JsonObject, NewResult, ResultStatus, TaskStatus};
use taskstore::store::StoreConfig;

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn status_moves_along_the_lifecycle(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let steps = [
        (TaskStatus::Working, Some("step 1 of 3")),
        (TaskStatus::InputRequired, Some("need a name")),
        (TaskStatus::InputRequired, None),
        (TaskStatus::Working, Some("step 2 of 3")),
        (TaskStatus::Completed, None),
    ];
    let mut previous = task;
    for (next, message) in steps {
        let updated = store
            .update_status(&all(), &previous.task_id, status(next, message))
            .await
            .expect("update");
        assert_eq!(updated.status, next);
        assert_eq!(updated.status_message.as_deref(), message);
        assert!(
            updated.last_updated_at > previous.last_updated_at,
            "last_updated_at moves forward"
        );
        assert_eq!(updated.created_at, previous.created_at);
        assert_eq!(
            store.get_task(&all(), &updated.task_id).await.expect("get"),
            updated
        );
        previous = updated;
    }
}

pub async fn terminal_tasks_refuse_updates_and_change_nothing(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let completed = create(&store, &all()).await;
    store
        .store_result(&all(), &completed.task_id, completed_result())
        .await
        .expect("store");
    let failed = create(&store, &all()).await;
    store
        .update_status(
            &all(),
            &failed.task_id,
            status(TaskStatus::Failed, Some("boom")),
        )
        .await
        .expect("fail");
    let cancelled = create(&store, &all()).await;
    store
        .cancel_task(&all(), &cancelled.task_id)
        .await
        .expect("cancel");

    for task in [completed, failed, cancelled] {
        let before = store.get_task(&all(), &task.task_id).await.expect("get");
        for next in TaskStatus::ALL {
            assert_err!(
                store
                    .update_status(&all(), &task.task_id, status(next, Some("again")))
                    .await,
                StoreError::FailedPrecondition(_)
            );
        }
        assert_eq!(
            store.get_task(&all(), &task.task_id).await.expect("get"),
            before
        );
    }
}

pub async fn stores_and_returns_results_verbatim(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    // Key order, spacing and number spelling survive untouched.
    let text = "{\"z\":1, \"content\":[{\"type\":\"text\",\"text\":\"héllo\"}],\"n\":1.50,\"isError\":false}";
    let task = create(&store, &all()).await;
    let stored = store
        .store_result(&all(), &task.task_id, completed(text))
        .await
        .expect("store");
    assert_eq!(stored.status, TaskStatus::Completed);
    assert!(stored.last_updated_at > task.last_updated_at);
    let result = store
        .get_result(&all(), &task.task_id)
        .await
        .expect("result");
    assert_eq!(result.result.as_str(), text);
    assert_eq!(result.task, stored);

    let failing = create(&store, &all()).await;
    let failure = NewResult {
        status: ResultStatus::Failed,
        result: JsonObject::parse(r#"{"content":[],"isError":true}"#).expect("json"),
        message: Some("the tool crashed".to_owned()),
        lease: None,
    };
    let failed = store
        .store_result(&all(), &failing.task_id, failure)
        .await
        .expect("store failure");
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.status_message.as_deref(), Some("the tool crashed"));
    let result = store
        .get_result(&all(), &failing.task_id)
        .await
        .expect("result");
    assert_eq!(result.task.status, TaskStatus::Failed);
    assert_eq!(result.result.as_str(), r#"{"content":[],"isError":true}"#);
}

pub async fn first_result_stays(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    store
        .store_result(&all(), &task.task_id, completed(r#"{"first":true}"#))
        .await
        .expect("store");
    let before = store.get_task(&all(), &task.task_id).await.expect("get");
    let second = NewResult {
        status: ResultStatus::Failed,
        ..completed(r#"{"second":true}"#)
    };
    assert_err!(
        store.store_result(&all(), &task.task_id, second).await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store
            .store_result(&all(), &task.task_id, completed(r#"{"third":true}"#))
            .await,
        StoreError::FailedPrecondition(_)
    );
    let result = store
        .get_result(&all(), &task.task_id)
        .await
        .expect("result");
    assert_eq!(result.result.as_str(), r#"{"first":true}"#);
    assert_eq!(result.task, before);
}

pub async fn result_is_refused_until_there_is_one(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let working = create(&store, &all()).await;
    assert_err!(
        store.get_result(&all(), &working.task_id).await,
        StoreError::FailedPrecondition(_)
    );

    let waiting = create(&store, &all()).await;
    store
        .update_status(
            &all(),
            &waiting.task_id,
            status(TaskStatus::InputRequired, None),
        )
        .await
        .expect("update");
    assert_err!(
        store.get_result(&all(), &waiting.task_id).await,
        StoreError::FailedPrecondition(_)
    );

    let cancelled = create(&store, &all()).await;
    store
        .cancel_task(&all(), &cancelled.task_id)
        .await
        .expect("cancel");
    assert_err!(
        store.get_result(&all(), &cancelled.task_id).await,
        StoreError::FailedPrecondition(_)
    );

    // Completed through UpdateTaskStatus: terminal, but without a result.
    let bare = create(&store, &all()).await;
    store
        .update_status(&all(), &bare.task_id, status(TaskStatus::Completed, None))
        .await
        .expect("update");
    assert_err!(
        store.get_result(&all(), &bare.task_id).await,
        StoreError::FailedPrecondition(_)
    );

    let missing = TaskId::parse("no-such-task").expect("id");
    assert_err!(
        store.get_result(&all(), &missing).await,
        StoreError::NotFound
    );
}

pub async fn cancel_is_idempotent(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &all()).await;
    let cancelled = store
        .cancel_task(&all(), &task.task_id)
        .await
        .expect("cancel");
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert!(cancelled.last_updated_at > task.last_updated_at);
    assert_eq!(
        store.get_task(&all(), &task.task_id).await.expect("get"),
        cancelled
    );
    // Again: unchanged, no error.
    assert_eq!(
        store
            .cancel_task(&all(), &task.task_id)
            .await
            .expect("cancel again"),
        cancelled
    );

    let waiting = create(&store, &all()).await;
    store
        .update_status(
            &all(),
            &waiting.task_id,
            status(TaskStatus::InputRequired, None),
        )
        .await
        .expect("update");
    assert_eq!(
        store
            .cancel_task(&all(), &waiting.task_id)
            .await
            .expect("cancel")
            .status,
        TaskStatus::Cancelled
    );

    let done = create(&store, &all()).await;
    let done = store
        .store_result(&all(), &done.task_id, completed_result())
        .await
        .expect("store");
    assert_eq!(
        store
            .cancel_task(&all(), &done.task_id)
            .await
            .expect("cancel finished"),
        done
    );

    let missing = TaskId::parse("no-such-task").expect("id");
    assert_err!(
        store.cancel_task(&all(), &missing).await,
        StoreError::NotFound
    );
}

fn completed_result() -> NewResult {
    completed(r#"{"content":[{"type":"text","text":"done"}]}"#)
}
