//! The outbox relay: each committed job published once, stale jobs
//! dropped, jobs for tools nobody serves held (and said so), and a new job
//! relayed at once. A recording publisher stands in for the queue (the
//! RabbitMQ publisher is exercised end to end in the worker's tests).

use std::time::Duration;

use taskstore::StoreError;
use taskstore::domain::{ExecutionPolicy, TraceContext};
use taskstore_proto::jobs::JobMessage;

use super::*;
use crate::assert_err;
use crate::common::recorder::{Recorder, SharedRecorder};
use crate::common::{Backend, Stores};

pub async fn the_relay_publishes_each_job_once_and_drops_stale_ones(backend: &dyn Backend) {
    let Stores {
        store, dispatch, ..
    } = backend.stores(with_policy(short_leases())).await;
    let kept = dispatched(&store, None).await;
    let cancelled = dispatched(&store, None).await;
    store.cancel_task(&all(), &cancelled).await.expect("cancel");

    let down = Recorder {
        down: true,
        ..Recorder::default()
    };
    assert_err!(
        dispatch.relay_due_jobs(&down, 100).await,
        StoreError::Unavailable(_)
    );

    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        1
    );
    assert_eq!(
        dispatch
            .relay_due_jobs(&queue, 100)
            .await
            .expect("relay again"),
        0,
        "published rows are gone"
    );
    let jobs = queue.jobs.lock().expect("lock").clone();
    assert_eq!(
        jobs,
        [JobMessage {
            tenant_id: "default".into(),
            task_id: kept.to_string(),
            generation: 1,
            tool: "echo".into(),
            trace_context: None,
        }]
    );
}

pub async fn a_job_for_an_unserved_tool_waits_and_says_so(backend: &dyn Backend) {
    let policy = ExecutionPolicy {
        unroutable_retry: Duration::from_millis(300),
        ..short_leases()
    };
    let Stores {
        store, dispatch, ..
    } = backend.stores(with_policy(policy)).await;
    let id = dispatched(&store, None).await;
    let nobody = Recorder::default();
    assert_eq!(
        dispatch.relay_due_jobs(&nobody, 100).await.expect("relay"),
        0
    );
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(
        task.status_message.as_deref(),
        Some("waiting for a worker that serves tool echo")
    );
    assert_eq!(
        dispatch.relay_due_jobs(&nobody, 100).await.expect("relay"),
        0
    );
    assert_eq!(
        nobody.jobs.lock().expect("lock").len(),
        1,
        "not offered again before its retry time"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        1,
        "offered again once a worker may exist"
    );
}

pub async fn the_relay_wakes_at_once_on_a_new_job(backend: &dyn Backend) {
    let Stores {
        store, dispatch, ..
    } = backend.stores(with_policy(short_leases())).await;
    let queue = SharedRecorder::routable();
    let shutdown = tokio_util::sync::CancellationToken::new();
    // A poll interval of an hour: only the wake-up can publish in time.
    let relay = taskstore::dispatch::relay::spawn(
        dispatch.clone(),
        queue.connect(),
        Duration::from_secs(3600),
        taskstore::health::QueueHealth::default(),
        shutdown.clone(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = dispatched(&store, None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while queue.0.jobs.lock().expect("lock").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay did not wake for the new job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        queue.0.jobs.lock().expect("lock")[0].task_id,
        id.to_string()
    );
    shutdown.cancel();
    relay.await.expect("relay stops");
}

pub async fn a_job_carries_the_trace_its_task_was_created_in(backend: &dyn Backend) {
    let Stores {
        store,
        dispatch,
        execution,
        ..
    } = backend.stores(with_policy(short_leases())).await;
    let traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let task = NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts: None,
        }),
        trace_context: TraceContext::parse(traceparent),
        ..new_task()
    };
    let id = store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id;
    let untraced = dispatched(&store, None).await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        2
    );
    let trace_of = |queue: &Recorder, id: &TaskId| {
        queue
            .jobs
            .lock()
            .expect("lock")
            .iter()
            .rev()
            .find(|job| job.task_id == id.to_string())
            .map(|job| job.trace_context.clone())
    };
    assert_eq!(trace_of(&queue, &id), Some(Some(traceparent.to_owned())));
    assert_eq!(trace_of(&queue, &untraced), Some(None));

    // Given back by a stopping worker, the job goes out again in the same trace.
    let claim = execution
        .claim(&tenant(), &id, 1, "w")
        .await
        .expect("claim");
    execution
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            taskstore::domain::ReleaseReason::Shutdown,
            "stopping",
        )
        .await
        .expect("release");
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        1
    );
    assert_eq!(trace_of(&queue, &id), Some(Some(traceparent.to_owned())));
}
