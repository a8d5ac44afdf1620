//! Following every change of a scope (`follow_tasks`, gRPC WatchTasks):
//! what MCP notifications and live views are made of.

use std::time::Duration;

use taskstore::domain::{JsonObject, TaskStatus, TenantId};
use taskstore::store::{Followed, StoreConfig, TaskFollow};
use tokio_stream::StreamExt;

use super::*;
use crate::common::Backend;

/// The next task the follow shows (resyncs skipped), within a while.
async fn next_task(follow: &mut TaskFollow) -> taskstore::store::ChangedTask {
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), follow.next())
            .await
            .expect("a change within 10 s")
            .expect("the follow goes on");
        if let Followed::Changed(changed) = item {
            return (*changed).clone();
        }
    }
}

/// Nothing but resyncs arrives for a moment.
async fn quiet(follow: &mut TaskFollow) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while let Ok(item) = tokio::time::timeout_at(deadline, follow.next()).await {
        match item {
            Some(Followed::Resync) => {}
            other => panic!("expected nothing, got {other:?}"),
        }
    }
}

pub async fn following_shows_every_change_of_the_scope_in_order(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut everything = store.follow_tasks(&all()).await.expect("follow");
    let mut only_a = store.follow_tasks(&session("a")).await.expect("follow");
    let in_a = create(&store, &session("a")).await;
    let in_b = create(&store, &session("b")).await;

    let steps = [
        (
            &in_a,
            session("a"),
            TaskStatus::Working,
            Some("copying (1/3)"),
        ),
        (
            &in_b,
            session("b"),
            TaskStatus::InputRequired,
            Some("which?"),
        ),
        (
            &in_a,
            session("a"),
            TaskStatus::Working,
            Some("copying (2/3)"),
        ),
    ];
    for (task, scope, next, message) in &steps {
        store
            .update_status(scope, &task.task_id, status(*next, *message))
            .await
            .expect("update");
    }
    let done = store
        .store_result(&session("a"), &in_a.task_id, completed(r#"{"content":[]}"#))
        .await
        .expect("result");

    let mut seen = Vec::new();
    for _ in 0..4 {
        let changed = next_task(&mut everything).await;
        // The task the follow shows is the task a read returns (for the
        // changes that are the last of their task).
        if changed.task.status.is_terminal() || changed.task.task_id == in_b.task_id {
            let now = store.get_task(&all(), &changed.task.task_id).await;
            assert_eq!(now.expect("read"), changed.task);
        }
        seen.push((
            changed.task.task_id.clone(),
            changed.task.status,
            changed.task.status_message.clone(),
        ));
    }
    let expected: Vec<_> = steps
        .iter()
        .map(|(task, _, status, message)| {
            (task.task_id.clone(), *status, message.map(str::to_owned))
        })
        .chain([(in_a.task_id.clone(), TaskStatus::Completed, None)])
        .collect();
    assert_eq!(seen, expected, "every change, in order");

    let mut seen_in_a = Vec::new();
    for _ in 0..3 {
        seen_in_a.push(next_task(&mut only_a).await.task);
    }
    assert!(
        seen_in_a.iter().all(|task| task.task_id == in_a.task_id),
        "a session's follow shows its tasks only: {seen_in_a:?}"
    );
    assert_eq!(seen_in_a.last(), Some(&done));
    quiet(&mut only_a).await;
}

pub async fn following_carries_the_progress_token(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut follow = store.follow_tasks(&all()).await.expect("follow");
    let with_token = NewTask {
        request: JsonObject::parse(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p-1"}}}"#,
        )
        .expect("request"),
        ..new_task()
    };
    let task = store.create_task(&all(), with_token).await.expect("create");
    let plain = create(&store, &all()).await;
    for id in [&task.task_id, &plain.task_id] {
        store
            .update_status(&all(), id, status(TaskStatus::Working, Some("step")))
            .await
            .expect("update");
    }
    // Every change of each task carries its token (a follow that fell
    // behind may merge a task's changes, so their order across tasks is
    // not what is checked here), up to each one's update.
    let mut updated = std::collections::HashSet::new();
    while updated.len() < 2 {
        let changed = next_task(&mut follow).await;
        let expected = if changed.task.task_id == task.task_id {
            Some(serde_json::json!("p-1"))
        } else {
            assert_eq!(changed.task.task_id, plain.task_id, "only these two change");
            None
        };
        assert_eq!(
            changed.progress_token.map(|t| t.to_value()),
            expected,
            "the token of {}",
            changed.task.task_id
        );
        if changed.task.status_message.as_deref() == Some("step") {
            updated.insert(changed.task.task_id);
        }
    }
}

pub async fn following_never_shows_another_tenants_tasks(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let acme = Scope {
        tenant: TenantId::parse("acme").expect("tenant"),
        session: None,
    };
    if !backend.chooses_tenant() {
        // Over gRPC the tenant comes from the server, never from the caller
        // (the tenant probe of the gRPC tests covers WatchTasks).
        assert!(matches!(
            store.follow_tasks(&acme).await.map(|_| ()),
            Err(taskstore::StoreError::InvalidArgument(_))
        ));
        return;
    }
    let mut follow = store.follow_tasks(&acme).await.expect("follow");
    let theirs = create(&store, &all()).await;
    store
        .update_status(
            &all(),
            &theirs.task_id,
            status(TaskStatus::Working, Some("secret")),
        )
        .await
        .expect("update");
    store
        .cancel_task(&all(), &theirs.task_id)
        .await
        .expect("cancel");
    quiet(&mut follow).await;

    let ours = create(&store, &acme).await;
    store
        .cancel_task(&acme, &ours.task_id)
        .await
        .expect("cancel");
    let changed = next_task(&mut follow).await;
    assert_eq!(changed.task.task_id, ours.task_id);
    assert_eq!(changed.task.status, TaskStatus::Cancelled);
}
