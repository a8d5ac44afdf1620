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
        .list_tasks(
            &all(),
            PageRequest {
                cursor: None,
                page_size: Some(10),
            },
        )
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
        .list_tasks(
            &all(),
            PageRequest {
                cursor: None,
                page_size: Some(25),
            },
        )
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
        .list_tasks(
            &session("s1"),
            PageRequest {
                cursor: None,
                page_size: Some(1),
            },
        )
        .await
        .expect("list");
    let cursor = page.next_cursor.expect("more pages");
    let list = |scope: Scope, cursor: String| {
        let store = store.clone();
        async move {
            store
                .list_tasks(
                    &scope,
                    PageRequest {
                        cursor: Some(cursor),
                        page_size: Some(1),
                    },
                )
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
        .list_tasks(
            &session("s1"),
            PageRequest {
                cursor: None,
                page_size: Some(2),
            },
        )
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
        .list_tasks(
            &all(),
            PageRequest {
                cursor: None,
                page_size: Some(2),
            },
        )
        .await
        .expect("list");
    for _ in 0..2 {
        created.push(create(&store, &all()).await);
    }
    let mut listed = first.tasks;
    let mut cursor = first.next_cursor;
    while let Some(next) = cursor {
        let page = store
            .list_tasks(
                &all(),
                PageRequest {
                    cursor: Some(next),
                    page_size: Some(2),
                },
            )
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
        .list_tasks(
            &all(),
            PageRequest {
                cursor: None,
                page_size: Some(2),
            },
        )
        .await
        .expect("list");
    assert_eq!(first.tasks.len(), 2);
    sleep_ms(500).await;
    let rest = store
        .list_tasks(
            &all(),
            PageRequest {
                cursor: first.next_cursor,
                page_size: Some(10),
            },
        )
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
