//! CreateTask.

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{PollPolicy, TaskStatus, TtlPolicy, TtlRequest};
use taskstore::store::StoreConfig;

use super::*;
use crate::assert_err;
use crate::common::Backend;

pub async fn starts_working_with_a_generated_id(backend: &dyn Backend) {
    let config = StoreConfig {
        ttl: TtlPolicy {
            default: Some(ttl(60_000)),
            max: None,
        },
        poll: PollPolicy {
            default: Duration::from_millis(2500),
            min: Duration::from_millis(100),
        },
        ..StoreConfig::default()
    };
    let store = backend.store(config).await;
    let first = create(&store, &all()).await;
    let second = create(&store, &all()).await;

    assert_eq!(first.status, TaskStatus::Working);
    assert_eq!(first.status_message, None);
    assert_eq!(first.session_id, None);
    assert_eq!(first.created_at, first.last_updated_at);
    assert_eq!(first.ttl, Some(ttl(60_000)));
    assert_eq!(first.poll_interval, Duration::from_millis(2500));
    // 128 random bits, as 32 hex digits; never repeated.
    assert_eq!(first.task_id.as_str().len(), 32);
    assert!(
        first
            .task_id
            .as_str()
            .bytes()
            .all(|b| b.is_ascii_hexdigit())
    );
    assert_ne!(first.task_id, second.task_id);
    assert_eq!(
        store.get_task(&all(), &first.task_id).await.expect("get"),
        first
    );
}

pub async fn returns_the_actual_ttl(backend: &dyn Backend) {
    let capped = backend
        .store(StoreConfig {
            ttl: TtlPolicy {
                default: Some(ttl(60_000)),
                max: Some(ttl(120_000)),
            },
            ..StoreConfig::default()
        })
        .await;
    let actual = |store: Store, requested: Option<u64>| async move {
        let task = match requested {
            Some(ms) => task_with_ttl(ms),
            None => new_task(),
        };
        store.create_task(&all(), task).await.expect("create").ttl
    };
    assert_eq!(actual(capped.clone(), None).await, Some(ttl(60_000)));
    assert_eq!(
        actual(capped.clone(), Some(90_000)).await,
        Some(ttl(90_000))
    );
    assert_eq!(
        actual(capped.clone(), Some(3_600_000)).await,
        Some(ttl(120_000))
    );

    let unlimited = backend.store(StoreConfig::default()).await;
    assert_eq!(actual(unlimited.clone(), None).await, None);
    assert_eq!(actual(unlimited, Some(5000)).await, Some(ttl(5000)));
}

pub async fn caller_supplied_ids_are_unique(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = store
        .create_task(&all(), task_with_id("call:42/{x}~"))
        .await
        .expect("create");
    assert_eq!(task.task_id.as_str(), "call:42/{x}~");
    assert_err!(
        store
            .create_task(&all(), task_with_id("call:42/{x}~"))
            .await,
        StoreError::AlreadyExists(_)
    );
    // Ids are unique per tenant, whatever the session.
    assert_err!(
        store
            .create_task(&session("s1"), task_with_id("call:42/{x}~"))
            .await,
        StoreError::AlreadyExists(_)
    );
    // The refused creates changed nothing.
    assert_eq!(
        store.get_task(&all(), &task.task_id).await.expect("get"),
        task
    );
}

/// `.` and `..` cannot be a URL path segment (browsers resolve them away):
/// no task may be named so, through any edge (issue 37, defect 5).
pub async fn ids_urls_cannot_carry_are_refused(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    for id in [".", ".."] {
        assert_err!(
            store.create_task(&all(), task_with_id(id)).await,
            StoreError::InvalidArgument(_)
        );
    }
    let listed = store
        .list_tasks(&all(), Default::default())
        .await
        .expect("list");
    assert!(listed.tasks.is_empty(), "nothing was created");
    let dotted = store
        .create_task(&all(), task_with_id("..."))
        .await
        .expect("three dots are an ordinary id");
    assert_eq!(dotted.task_id.as_str(), "...");
}

pub async fn binds_the_session(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let task = create(&store, &session("s1")).await;
    assert_eq!(task.session_id.as_ref().map(|s| s.as_str()), Some("s1"));
    assert_eq!(
        store
            .get_task(&session("s1"), &task.task_id)
            .await
            .expect("get"),
        task
    );
}

/// A time to live that runs out within the test, yet not before the
/// calls made meanwhile on a busy machine.
const SHORT_TTL_MS: u64 = 1500;

pub async fn reuses_the_id_of_an_expired_task(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let old = store
        .create_task(
            &all(),
            NewTask {
                // Long enough for the update below on a loaded machine.
                ttl: Some(ttl(SHORT_TTL_MS)).into(),
                ..task_with_id("recycled")
            },
        )
        .await
        .expect("create");
    store
        .update_status(
            &all(),
            &old.task_id,
            status(TaskStatus::InputRequired, Some("old")),
        )
        .await
        .expect("update");
    sleep_ms(SHORT_TTL_MS + 200).await;
    // Expired tasks no longer exist, so their ids are free again.
    let new = store
        .create_task(&all(), task_with_id("recycled"))
        .await
        .expect("create again");
    assert_eq!(new.status, TaskStatus::Working);
    assert_eq!(new.status_message, None);
    assert!(new.created_at > old.created_at);
    assert_eq!(new.ttl, None);
}

pub async fn no_expiry_is_granted_only_without_a_maximum(backend: &dyn Backend) {
    let forever = NewTask {
        ttl: TtlRequest::Unlimited,
        ..new_task()
    };
    let open = backend
        .store(StoreConfig {
            ttl: TtlPolicy {
                default: Some(ttl(60_000)),
                max: None,
            },
            ..StoreConfig::default()
        })
        .await;
    let kept = open
        .create_task(&all(), forever.clone())
        .await
        .expect("create");
    assert_eq!(kept.ttl, None, "kept until deleted");
    assert_eq!(
        open.get_task(&all(), &kept.task_id).await.expect("get").ttl,
        None
    );

    let capped = backend
        .store(StoreConfig {
            ttl: TtlPolicy {
                default: Some(ttl(60_000)),
                max: Some(ttl(120_000)),
            },
            ..StoreConfig::default()
        })
        .await;
    let bounded = capped.create_task(&all(), forever).await.expect("create");
    assert_eq!(bounded.ttl, Some(ttl(120_000)), "the maximum instead");
}

pub async fn a_requested_poll_interval_is_granted_within_bounds(backend: &dyn Backend) {
    let store = backend
        .store(StoreConfig {
            poll: PollPolicy {
                default: Duration::from_secs(2),
                min: Duration::from_millis(500),
            },
            ..StoreConfig::default()
        })
        .await;
    let granted = |requested: Option<u64>| {
        let store = store.clone();
        async move {
            let task = NewTask {
                poll_interval: requested.map(Duration::from_millis),
                ..new_task()
            };
            let created = store.create_task(&all(), task).await.expect("create");
            let read = store.get_task(&all(), &created.task_id).await.expect("get");
            assert_eq!(read.poll_interval, created.poll_interval, "kept as granted");
            created.poll_interval.as_millis()
        }
    };
    assert_eq!(granted(None).await, 2000);
    assert_eq!(granted(Some(750)).await, 750);
    assert_eq!(granted(Some(5)).await, 500, "never below the minimum");
}
