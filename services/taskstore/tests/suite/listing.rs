//! ListTasks: keyset pagination behind opaque cursors.

use std::collections::HashSet;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use taskstore::StoreError;
use taskstore::domain::{PageRequest, TaskStatus};
use taskstore::store::{PagePolicy, StoreConfig};

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn pages_oldest_first_without_gaps(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut created = Vec::new();
    for _ in 0..25 {
        created.push(create(&store, &all()).await);
    }
    let first = store
        .list_tasks(&all(), page_request(None, Some(10)))
        .await
        .expect("list");
    assert_eq!(first.tasks.len(), 10);
    assert!(first.next_cursor.is_some());

    let listed = list_all(&store, &all(), 10).await;
    assert_eq!(ids(&listed), ids(&created), "oldest first, each task once");
    for pair in listed.windows(2) {
        assert!((pair[0].created_at, &pair[0].task_id) < (pair[1].created_at, &pair[1].task_id));
    }
    // An exact multiple of the page size ends without an empty extra page.
    let last = store
        .list_tasks(&all(), page_request(None, Some(25)))
        .await
        .expect("list");
    assert_eq!(last.tasks.len(), 25);
    assert_eq!(last.next_cursor, None);
}

pub async fn page_sizes_follow_the_policy(backend: &dyn Backend) {
    let config = StoreConfig {
        paging: PagePolicy {
            default_size: 3,
            max_size: 5,
        },
        ..StoreConfig::default()
    };
    let store = backend.store(config).await;
    for _ in 0..8 {
        create(&store, &all()).await;
    }
    let size = |page_size| {
        let store = store.clone();
        async move {
            store
                .list_tasks(
                    &all(),
                    PageRequest {
                        cursor: None,
                        page_size,
                        ..Default::default()
                    },
                )
                .await
                .expect("list")
                .tasks
                .len()
        }
    };
    assert_eq!(size(None).await, 3);
    assert_eq!(size(Some(0)).await, 3);
    assert_eq!(size(Some(4)).await, 4);
    assert_eq!(size(Some(1000)).await, 5);
}

pub async fn refuses_tampered_and_foreign_cursors(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    for _ in 0..3 {
        create(&store, &session("s1")).await;
    }
    let page = store
        .list_tasks(&session("s1"), page_request(None, Some(1)))
        .await
        .expect("list");
    let cursor = page.next_cursor.expect("more pages");
    let list = |scope: Scope, cursor: String| {
        let store = store.clone();
        async move {
            store
                .list_tasks(&scope, page_request(Some(cursor), Some(1)))
                .await
        }
    };
    assert!(list(session("s1"), cursor.clone()).await.is_ok());

    let mut bytes = URL_SAFE_NO_PAD
        .decode(&cursor)
        .expect("cursor is base64url");
    for i in [0, bytes.len() / 2, bytes.len() - 1] {
        bytes[i] ^= 0x40;
        assert_err!(
            list(session("s1"), URL_SAFE_NO_PAD.encode(&bytes)).await,
            StoreError::InvalidArgument(_)
        );
        bytes[i] ^= 0x40;
    }
    for garbage in [
        "",
        "not a cursor",
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        "%%%",
    ] {
        assert_err!(
            list(session("s1"), garbage.to_owned()).await,
            StoreError::InvalidArgument(_)
        );
    }
    assert_err!(
        list(session("s1"), "x".repeat(100_000)).await,
        StoreError::InvalidArgument(_)
    );
    // A cursor only works with the filter it was issued for.
    assert_err!(
        list(session("s2"), cursor.clone()).await,
        StoreError::InvalidArgument(_)
    );
    assert_err!(list(all(), cursor).await, StoreError::InvalidArgument(_));
}

pub async fn filters_by_session_before_paging(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut mine = Vec::new();
    for i in 0..10 {
        let task = create(&store, &session(if i % 2 == 0 { "s1" } else { "s2" })).await;
        if i % 2 == 0 {
            mine.push(task);
        }
    }
    create(&store, &all()).await;
    let first = store
        .list_tasks(&session("s1"), page_request(None, Some(2)))
        .await
        .expect("list");
    assert_eq!(
        ids(&first.tasks),
        ids(&mine[..2]),
        "full pages of the session's tasks"
    );
    assert_eq!(ids(&list_all(&store, &session("s1"), 2).await), ids(&mine));
    assert_eq!(list_all(&store, &session("s2"), 3).await.len(), 5);
    assert_eq!(list_all(&store, &all(), 4).await.len(), 11);
    assert!(list_all(&store, &session("nobody"), 4).await.is_empty());
}

pub async fn sees_tasks_created_between_pages(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut created = Vec::new();
    for _ in 0..3 {
        created.push(create(&store, &all()).await);
    }
    let first = store
        .list_tasks(&all(), page_request(None, Some(2)))
        .await
        .expect("list");
    for _ in 0..2 {
        created.push(create(&store, &all()).await);
    }
    let mut listed = first.tasks;
    let mut cursor = first.next_cursor;
    while let Some(next) = cursor {
        let page = store
            .list_tasks(&all(), page_request(Some(next), Some(2)))
            .await
            .expect("list");
        listed.extend(page.tasks);
        cursor = page.next_cursor;
    }
    assert_eq!(ids(&listed), ids(&created));
}

pub async fn drops_tasks_that_expire_between_pages(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut lasting = Vec::new();
    for i in 0..6 {
        let task = if i % 2 == 0 {
            new_task()
        } else {
            task_with_ttl(300)
        };
        let task = store.create_task(&all(), task).await.expect("create");
        if i % 2 == 0 {
            lasting.push(task);
        }
    }
    let first = store
        .list_tasks(&all(), page_request(None, Some(2)))
        .await
        .expect("list");
    assert_eq!(first.tasks.len(), 2);
    sleep_ms(500).await;
    let rest = store
        .list_tasks(&all(), page_request(first.next_cursor, Some(10)))
        .await
        .expect("list");
    assert_eq!(
        ids(&rest.tasks),
        ids(&lasting[1..]),
        "expired tasks vanish at once"
    );
}

pub async fn survives_concurrent_updates(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let mut created = Vec::new();
    for _ in 0..30 {
        created.push(create(&store, &all()).await);
    }
    let updater = {
        let store = store.clone();
        let ids: Vec<_> = created.iter().map(|t| t.task_id.clone()).collect();
        tokio::spawn(async move {
            for id in ids {
                let message = Some("moving");
                store
                    .update_status(&all(), &id, status(TaskStatus::InputRequired, message))
                    .await
                    .expect("update");
            }
        })
    };
    let listed = list_all(&store, &all(), 4).await;
    updater.await.expect("updater");
    let unique: HashSet<_> = ids(&listed).into_iter().collect();
    assert_eq!(listed.len(), 30);
    assert_eq!(unique.len(), 30);
}

/// Every task names its tool; listings filter by status and tool before
/// paging, and a cursor works only with the filter it was issued for.
pub async fn filters_by_status_and_tool_before_paging(backend: &dyn Backend) {
    use taskstore::domain::{DispatchRequest, JsonObject, TaskFilter, ToolName};
    let store = backend.store(StoreConfig::default()).await;
    let tool = |name: &str| ToolName::parse(name).expect("tool name");
    let call = |name: &str| NewTask {
        request: JsonObject::parse(format!(
            r#"{{"method":"tools/call","params":{{"name":"{name}"}}}}"#
        ))
        .expect("request"),
        ..new_task()
    };
    let mut echoes = Vec::new();
    for _ in 0..5 {
        echoes.push(
            store
                .create_task(&all(), call("echo"))
                .await
                .expect("create"),
        );
    }
    let sleep = store
        .create_task(&all(), call("sleep"))
        .await
        .expect("create");
    let rerouted = NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: tool("hash"),
            max_attempts: None,
        }),
        ..call("sleep")
    };
    let dispatched = store.create_task(&all(), rerouted).await.expect("create");
    let plain = NewTask {
        request: JsonObject::parse(r#"{"method":"ping"}"#).expect("request"),
        ..new_task()
    };
    let untooled = store.create_task(&all(), plain).await.expect("create");
    assert_eq!(
        echoes[0].tool,
        Some(tool("echo")),
        "a tools/call names its tool"
    );
    assert_eq!(
        dispatched.tool,
        Some(tool("hash")),
        "dispatch decides the tool"
    );
    assert_eq!(untooled.tool, None);
    assert_eq!(
        store
            .get_task(&all(), &sleep.task_id)
            .await
            .expect("get")
            .tool,
        Some(tool("sleep"))
    );
    for done in &echoes[..2] {
        store
            .cancel_task(&all(), &done.task_id)
            .await
            .expect("cancel");
    }

    let listed = |filter: TaskFilter, page_size: u32| {
        let store = store.clone();
        async move {
            let mut tasks = Vec::new();
            let mut cursor = None;
            loop {
                let request = PageRequest {
                    cursor,
                    page_size: Some(page_size),
                    filter: filter.clone(),
                };
                let page = store.list_tasks(&all(), request).await.expect("list");
                tasks.extend(page.tasks);
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => return tasks,
                }
            }
        }
    };
    let echo_ids = ids(&echoes);
    assert_eq!(
        ids(&listed(TaskFilter::new([], Some(tool("echo"))), 2).await),
        echo_ids
    );
    assert_eq!(
        ids(&listed(
            TaskFilter::new([TaskStatus::Working], Some(tool("echo"))),
            1
        )
        .await),
        echo_ids[2..]
    );
    assert_eq!(
        ids(&listed(TaskFilter::new([TaskStatus::Cancelled], None), 1).await),
        echo_ids[..2]
    );
    let working = listed(
        TaskFilter::new([TaskStatus::Working, TaskStatus::InputRequired], None),
        2,
    )
    .await;
    assert_eq!(working.len(), 6);
    assert!(working.iter().all(|t| t.status == TaskStatus::Working));
    assert_eq!(
        ids(&listed(TaskFilter::new([], Some(tool("hash"))), 5).await),
        ids(&[dispatched])
    );
    assert!(
        listed(TaskFilter::new([], Some(tool("nothing"))), 5)
            .await
            .is_empty()
    );

    // The cursor of a filtered listing is refused without its filter, and
    // the other way round.
    let filtered = TaskFilter::new([], Some(tool("echo")));
    let first = store
        .list_tasks(
            &all(),
            PageRequest {
                cursor: None,
                page_size: Some(1),
                filter: filtered.clone(),
            },
        )
        .await
        .expect("list");
    let cursor = first.next_cursor.expect("more pages");
    assert_err!(
        store
            .list_tasks(&all(), page_request(Some(cursor.clone()), Some(1)))
            .await,
        StoreError::InvalidArgument(_)
    );
    let unfiltered = store
        .list_tasks(&all(), page_request(None, Some(1)))
        .await
        .expect("list")
        .next_cursor
        .expect("more pages");
    assert_err!(
        store
            .list_tasks(
                &all(),
                PageRequest {
                    cursor: Some(unfiltered),
                    page_size: Some(1),
                    filter: filtered.clone()
                }
            )
            .await,
        StoreError::InvalidArgument(_)
    );
    store
        .list_tasks(
            &all(),
            PageRequest {
                cursor: Some(cursor),
                page_size: Some(1),
                filter: filtered,
            },
        )
        .await
        .expect("the cursor works with its own filter");
}
