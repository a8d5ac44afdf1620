//! The change feed hears every write: each write the traits offer is made
//! in turn, and after each one every task whose state changed (as a read
//! shows it) must have been announced, as it now is, to a follow of the
//! tenant. A backend that changes a task without announcing it (a new
//! statement that skips the notification, a write that forgets the
//! in-process feed) fails here, naming the write.
//!
//! Not announced, by design: creation (see [`Ledger::track`]), expiry (nothing announces it; watchers re-read
//! every few seconds) and deletion (a follow cannot show a task that is
//! gone; `deletion::a_watcher_learns_that_its_task_was_deleted` covers it).

use std::collections::BTreeMap;
use std::time::Duration;

use taskstore::domain::{
    ExecutionPolicy, HoldOutcome, Holder, LeaseToken, ReleaseReason, TaskStatus,
};
use taskstore::store::execution::ExecutionStore;
use taskstore::store::{Followed, TaskFollow};
use tokio_stream::StreamExt;

use super::*;
use crate::common::recorder::Recorder;
use crate::common::{Backend, Stores};

/// How long an announcement may take to arrive.
const ANNOUNCED_WITHIN: Duration = Duration::from_secs(10);

/// The tasks the case made, as last read, and the follow that must have
/// announced each change.
struct Ledger {
    store: Store,
    follow: TaskFollow,
    known: BTreeMap<String, Option<Task>>,
}

impl Ledger {
    /// Follows a task from its creation on. A create is not announced (a
    /// task nobody knows of has no watcher, and creating stays cheap: the
    /// dashboard's live list finds new tasks by search), so its first state
    /// is read, not expected.
    async fn track(&mut self, id: &TaskId) {
        let task = self.store.get_task(&all(), id).await.expect("created");
        self.known.insert(id.to_string(), Some(task));
    }

    /// After `write`: every tracked task that changed was announced as it
    /// is now.
    async fn announced(&mut self, write: &str) {
        let mut unannounced = BTreeMap::new();
        for (id, last) in &mut self.known {
            let task_id = TaskId::parse(id).expect("tracked id");
            let now = self.store.get_task(&all(), &task_id).await.ok();
            if now != *last {
                if let Some(task) = &now {
                    unannounced.insert(id.clone(), task.clone());
                }
                *last = now;
            }
        }
        let deadline = tokio::time::Instant::now() + ANNOUNCED_WITHIN;
        while !unannounced.is_empty() {
            match tokio::time::timeout_at(deadline, self.follow.next()).await {
                Ok(Some(Followed::Changed(changed))) => {
                    let id = changed.task.task_id.to_string();
                    if unannounced.get(&id) == Some(&changed.task) {
                        unannounced.remove(&id);
                    }
                }
                Ok(Some(Followed::Resync)) => {}
                Ok(None) => panic!("{write}: the follow ended"),
                Err(_) => panic!(
                    "{write} changed these tasks without announcing them: {:?}",
                    unannounced.values().collect::<Vec<_>>()
                ),
            }
        }
    }
}

fn holder() -> Holder {
    Holder::parse("mcp server announced (pid 7)").expect("holder")
}

/// Claims `id` for `worker` under the last job the queue took for it.
async fn claim_queued(
    execution: &dyn ExecutionStore,
    queue: &Recorder,
    id: &TaskId,
    worker: &str,
) -> LeaseToken {
    let generation = {
        let jobs = queue.jobs.lock().expect("lock");
        jobs.iter()
            .rev()
            .find(|job| job.task_id == id.as_str())
            .map(|job| job.generation)
            .expect("a job for the task")
    };
    execution
        .claim(&tenant(), id, generation, worker)
        .await
        .unwrap_or_else(|err| panic!("{worker} claims: {err}"))
        .lease_token
}

pub async fn every_write_that_changes_a_task_is_announced(backend: &dyn Backend) {
    let Stores {
        store,
        execution,
        dispatch,
        ..
    } = backend
        .stores(with_policy(ExecutionPolicy {
            unroutable_retry: Duration::from_millis(300),
            ..short_leases()
        }))
        .await;
    let follow = store.follow_tasks(&all()).await.expect("follow");
    let mut ledger = Ledger {
        store: store.clone(),
        follow,
        known: BTreeMap::new(),
    };
    let unserved = Recorder::default();
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };

    // A task its caller drives: status updates, a question, a result.
    let plain = create(&store, &all()).await.task_id;
    ledger.track(&plain).await;
    for (next, message) in [
        (TaskStatus::Working, "copying"),
        (TaskStatus::InputRequired, "which?"),
        (TaskStatus::Working, "copying again"),
    ] {
        store
            .update_status(&all(), &plain, status(next, Some(message)))
            .await
            .expect("update");
        ledger.announced("update_status").await;
    }
    store
        .store_result(&all(), &plain, completed(r#"{"content":[]}"#))
        .await
        .expect("result");
    ledger.announced("store_result").await;

    let cancelled = create(&store, &all()).await.task_id;
    ledger.track(&cancelled).await;
    store.cancel_task(&all(), &cancelled).await.expect("cancel");
    ledger.announced("cancel_task").await;

    // A dispatched task through the execution protocol.
    let job = dispatched(&store, None).await;
    ledger.track(&job).await;
    dispatch
        .relay_due_jobs(&unserved, 100)
        .await
        .expect("relay to nobody");
    ledger
        .announced("settle_jobs (no worker serves the tool)")
        .await;
    tokio::time::sleep(Duration::from_millis(400)).await; // the job falls due again
    dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
    ledger.announced("settle_jobs (queued)").await;
    let lease = claim_queued(execution.as_ref(), &queue, &job, "w1").await;
    ledger.announced("claim").await;
    execution
        .renew(&tenant(), &job, &lease)
        .await
        .expect("renew");
    ledger.announced("renew").await;
    execution
        .ask(
            &tenant(),
            &job,
            &lease,
            &input_key("sure"),
            &confirm_question("Sure?"),
        )
        .await
        .expect("ask");
    ledger.announced("ask").await;
    store
        .answer_questions(&all(), &job, vec![(input_key("sure"), accept_ok())])
        .await
        .expect("answer");
    ledger.announced("answer_input_requests").await;
    store
        .update_status(
            &all(),
            &job,
            StatusUpdate {
                lease: Some(lease.clone()),
                ..status(TaskStatus::Working, Some("halfway"))
            },
        )
        .await
        .expect("progress");
    ledger.announced("update_status (fenced)").await;
    execution
        .release(
            &tenant(),
            &job,
            &lease,
            ReleaseReason::RetryableError,
            "flaky",
        )
        .await
        .expect("release");
    ledger.announced("release (retry)").await;
    tokio::time::sleep(Duration::from_millis(1100)).await; // the backoff
    dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
    let lease = claim_queued(execution.as_ref(), &queue, &job, "w2").await;
    ledger.announced("claim (second attempt)").await;
    let_leases_expire().await;
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);
    ledger
        .announced("reap_expired_leases (dispatched again)")
        .await;
    dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
    let lease_after_reap = claim_queued(execution.as_ref(), &queue, &job, "w3").await;
    assert_ne!(lease, lease_after_reap);
    execution
        .ask(
            &tenant(),
            &job,
            &lease_after_reap,
            &input_key("later"),
            &confirm_question("Later?"),
        )
        .await
        .expect("ask");
    execution
        .release(
            &tenant(),
            &job,
            &lease_after_reap,
            ReleaseReason::Parked,
            "waiting",
        )
        .await
        .expect("park");
    ledger.announced("release (parked)").await;
    store
        .answer_questions(&all(), &job, vec![(input_key("later"), accept_ok())])
        .await
        .expect("answer the parked task");
    ledger
        .announced("answer_input_requests (dispatched again)")
        .await;
    dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
    let last = claim_queued(execution.as_ref(), &queue, &job, "w4").await;
    store
        .store_result(&all(), &job, result(&last))
        .await
        .expect("the worker's result");
    ledger.announced("store_result (fenced)").await;

    // A task an SDK server holds, whose holder dies.
    let held = create(&store, &all()).await.task_id;
    ledger.track(&held).await;
    let Ok(HoldOutcome::Held { .. }) = store.hold_task(&all(), &held, &holder(), None).await else {
        panic!("the first hold is granted");
    };
    ledger.announced("hold_task").await;
    let_leases_expire().await;
    assert_eq!(dispatch.reap_expired_leases().await.expect("reap"), 1);
    ledger.announced("reap_expired_leases (holder gone)").await;
    let failed = store.get_task(&all(), &held).await.expect("get");
    assert_eq!(failed.status, TaskStatus::Failed);
}
