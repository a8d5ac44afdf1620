//! Start times: a task created to start later waits, `working` and saying
//! when it starts, with its job unpublished until then; a cancelled one
//! never starts; start times it may not have are refused, changing nothing.

use std::time::Duration;

use chrono::Utc;
use taskstore::StoreError;
use taskstore::domain::{DispatchRequest, StartTime, ToolName};

use super::*;
use crate::common::recorder::Recorder;
use crate::common::{Backend, Stores};
use taskstore::store::StoreConfig;

/// [`new_task`] dispatched to `echo`, to start at `start`.
pub fn starting(start: StartTime) -> NewTask {
    NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts: None,
            start: Some(start),
        }),
        ..new_task()
    }
}

pub async fn a_task_starts_not_before_its_start_time(backend: &dyn Backend) {
    let Stores {
        store, dispatch, ..
    } = backend.stores(with_policy(short_leases())).await;
    let delay = Duration::from_millis(1500);
    let asked_at = Utc::now();
    let later = store
        .create_task(&all(), starting(StartTime::After(delay)))
        .await
        .expect("create");
    assert_eq!(later.status, TaskStatus::Working);
    let message = later.status_message.clone().unwrap_or_default();
    let named: chrono::DateTime<Utc> = message
        .strip_prefix("starts at ")
        .and_then(|at| at.parse().ok())
        .unwrap_or_else(|| panic!("the message names the start: {message:?}"));
    // The message shows milliseconds, cut short.
    let lag = (named - asked_at).to_std().expect("the start is ahead") + Duration::from_millis(1);
    assert!(
        lag >= delay && lag < delay + Duration::from_secs(2),
        "{message}, asked at {asked_at}, lag {lag:?}"
    );
    let never = store
        .create_task(&all(), starting(StartTime::At(named)))
        .await
        .expect("create");
    store
        .cancel_task(&all(), &never.task_id)
        .await
        .expect("cancel");

    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        0,
        "nothing is due before the start"
    );
    // Once due, the job of the waiting task is published, and the
    // cancelled one's is dropped.
    let mut published = 0;
    for _ in 0..40 {
        published += dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
        if published > 0 {
            break;
        }
        sleep_ms(100).await;
    }
    assert!(Utc::now() >= named, "published before its start");
    let jobs = queue.jobs.lock().expect("lock").clone();
    assert_eq!(
        jobs.iter()
            .map(|job| job.task_id.as_str())
            .collect::<Vec<_>>(),
        [later.task_id.as_str()]
    );
}

pub async fn start_times_a_task_may_not_have_are_refused(backend: &dyn Backend) {
    let store = backend.store(StoreConfig::default()).await;
    let day = Duration::from_secs(86_400);
    let refused = [
        starting(StartTime::At(Utc::now() - chrono::TimeDelta::minutes(5))),
        starting(StartTime::After(day * 400)),
        starting(StartTime::At(Utc::now() + chrono::TimeDelta::days(400))),
        // A start after the task expires is nonsense.
        NewTask {
            ttl: task_with_ttl(60_000).ttl,
            ..starting(StartTime::After(Duration::from_secs(61)))
        },
    ];
    for task in refused {
        let start = task.dispatch.as_ref().and_then(|d| d.start);
        let outcome = store.create_task(&all(), task).await;
        assert!(
            matches!(&outcome, Err(StoreError::InvalidArgument(m)) if m.contains("start")),
            "{start:?}: {outcome:?}"
        );
    }
    assert!(list_all(&store, &all(), 10).await.is_empty());
    // A start a few seconds in the past (a client's clock) is now.
    let now = store
        .create_task(
            &all(),
            starting(StartTime::At(Utc::now() - chrono::TimeDelta::seconds(5))),
        )
        .await
        .expect("a start just past");
    assert_eq!(now.status_message, None);
}
