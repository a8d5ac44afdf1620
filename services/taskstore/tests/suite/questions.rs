//! Questions a task asks (MCP input requests), on every backend, directly
//! and through gRPC: asking is fenced by the lease, a key is unique over
//! the task's life and answered once, the task is `input_required` while a
//! question is open, answers go to the caller's own tasks only, a parked
//! task is dispatched again by its last answer, and questions go with
//! their task.

use taskstore::StoreError;
use taskstore::domain::{JsonObject, LeaseToken, ReleaseOutcome, ReleaseReason, TaskStatus};

use super::*;
use crate::assert_err;
use crate::common::recorder::Recorder;
use crate::common::{Backend, Stores};

/// A dispatched task, claimed: its id and lease.
async fn running(stores: &Stores) -> (TaskId, LeaseToken) {
    let id = dispatched(&stores.store, None).await;
    let claim = stores
        .execution
        .claim(&tenant(), &id, 1, "w1")
        .await
        .expect("claim");
    (id, claim.lease_token)
}

pub async fn a_question_waits_for_its_answer_and_is_answered_once(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let (id, lease) = running(&stores).await;
    let asked = execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("confirm"),
            &confirm_question("Delete 3 files?"),
        )
        .await
        .expect("ask");
    assert_eq!(asked, None, "nobody answered yet");
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(task.status, TaskStatus::InputRequired);
    assert_eq!(task.status_message.as_deref(), Some("Delete 3 files?"));
    // Asking again (an impatient tool, a re-run attempt) changes nothing.
    let again = execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("confirm"),
            &confirm_question("Delete 3 files?"),
        )
        .await
        .expect("ask again");
    assert_eq!(again, None);
    let listed = store.questions(&all(), &id).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key, input_key("confirm"));
    assert!(listed[0].answer.is_none());

    let answered = store
        .answer_questions(
            &all(),
            &id,
            vec![
                (input_key("confirm"), accept_ok()),
                (input_key("other"), accept_ok()),
            ],
        )
        .await
        .expect("answer");
    assert_eq!(answered.taken, vec![input_key("confirm")]);
    assert_eq!(
        answered.ignored,
        vec![input_key("other")],
        "unknown keys are ignored"
    );
    assert_eq!(answered.task.status, TaskStatus::Working, "all answered");
    let got = execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("confirm"),
            &confirm_question("Delete 3 files?"),
        )
        .await
        .expect("ask after the answer");
    assert_eq!(got, Some(accept_ok()), "the stored answer, at once");
    // Answered once: a second answer is ignored and the first stays.
    let later = JsonObject::parse(r#"{"action":"decline"}"#).expect("json");
    let twice = store
        .answer_questions(&all(), &id, vec![(input_key("confirm"), later)])
        .await
        .expect("answer again");
    assert_eq!((twice.taken.len(), twice.ignored.len()), (0, 1));
    let listed = store.questions(&all(), &id).await.expect("list");
    assert_eq!(
        listed[0].answer.as_ref().map(|a| a.result.clone()),
        Some(accept_ok())
    );
    // A key is never reused for another request.
    assert_err!(
        execution
            .ask(
                &tenant(),
                &id,
                &lease,
                &input_key("confirm"),
                &confirm_question("Delete 4 files?")
            )
            .await,
        StoreError::FailedPrecondition(_)
    );
}

pub async fn a_partial_answer_keeps_the_task_waiting(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let (id, lease) = running(&stores).await;
    for (k, message) in [("a", "First?"), ("b", "Second?")] {
        execution
            .ask(
                &tenant(),
                &id,
                &lease,
                &input_key(k),
                &confirm_question(message),
            )
            .await
            .expect("ask");
    }
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(
        task.status_message.as_deref(),
        Some("First? (and 1 more input request)")
    );
    let partial = store
        .answer_questions(&all(), &id, vec![(input_key("a"), accept_ok())])
        .await
        .expect("answer a");
    assert_eq!(partial.task.status, TaskStatus::InputRequired);
    assert_eq!(partial.task.status_message.as_deref(), Some("Second?"));
    let rest = store
        .answer_questions(&all(), &id, vec![(input_key("b"), accept_ok())])
        .await
        .expect("answer b");
    assert_eq!(rest.task.status, TaskStatus::Working);
}

pub async fn only_the_attempt_holding_the_lease_asks(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let (id, _lease) = running(&stores).await;
    let forged = LeaseToken::parse("not-the-lease").expect("token");
    assert_err!(
        execution
            .ask(
                &tenant(),
                &id,
                &forged,
                &input_key("k"),
                &confirm_question("?")
            )
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert!(store.questions(&all(), &id).await.expect("list").is_empty());
    assert_err!(
        execution
            .ask(
                &tenant(),
                &TaskId::parse("nope").expect("id"),
                &forged,
                &input_key("k"),
                &confirm_question("?")
            )
            .await,
        StoreError::NotFound
    );
}

pub async fn answers_reach_only_the_callers_own_tasks(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let id = store
        .create_task(
            &session("s1"),
            NewTask {
                dispatch: Some(taskstore::domain::DispatchRequest {
                    fairness: None,
                    rate: None,
                    concurrency: None,
                    priority: Default::default(),
                    retry: Default::default(),
                    start: None,
                    tool: taskstore::domain::ToolName::parse("echo").expect("tool"),
                    max_attempts: None,
                }),
                ..new_task()
            },
        )
        .await
        .expect("create")
        .task_id;
    let lease = execution
        .claim(&tenant(), &id, 1, "w1")
        .await
        .expect("claim")
        .lease_token;
    execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("k"),
            &confirm_question("Mine?"),
        )
        .await
        .expect("ask");
    assert_err!(
        store
            .answer_questions(&session("s2"), &id, vec![(input_key("k"), accept_ok())])
            .await,
        StoreError::NotFound
    );
    assert_err!(
        store.questions(&session("s2"), &id).await,
        StoreError::NotFound
    );
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(task.status, TaskStatus::InputRequired, "nothing changed");
    store
        .answer_questions(&session("s1"), &id, vec![(input_key("k"), accept_ok())])
        .await
        .expect("the owner answers");
}

/// A tool that waits too long parks: the attempt does not count, no
/// worker holds the task, and its last answer dispatches it again; the new
/// attempt finds the answer without asking twice.
pub async fn a_parked_task_is_dispatched_again_by_its_answer(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution, dispatch) = (&stores.store, &stores.execution, &stores.dispatch);
    let id = dispatched(store, None).await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    dispatch.relay_due_jobs(&queue, 100).await.expect("relay");
    let lease = execution
        .claim(&tenant(), &id, 1, "w1")
        .await
        .expect("claim")
        .lease_token;
    execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("k"),
            &confirm_question("Proceed?"),
        )
        .await
        .expect("ask");
    let parked = execution
        .release(&tenant(), &id, &lease, ReleaseReason::Parked, "waiting")
        .await
        .expect("park");
    assert_eq!(parked, ReleaseOutcome::Parked);
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(task.status, TaskStatus::InputRequired);
    assert_eq!(task.status_message.as_deref(), Some("Proceed?"));
    // No job, and the parked attempt's job cannot claim it.
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        0
    );
    assert_err!(
        execution.claim(&tenant(), &id, 1, "late").await,
        StoreError::FailedPrecondition(_)
    );
    // Leases of a parked task are nobody's: the reaper leaves it alone.
    let_leases_expire().await;
    dispatch.reap_expired_leases().await.expect("reap");
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        0
    );

    let answered = store
        .answer_questions(&all(), &id, vec![(input_key("k"), accept_ok())])
        .await
        .expect("answer");
    assert_eq!(answered.task.status, TaskStatus::Working);
    assert_eq!(
        dispatch.relay_due_jobs(&queue, 100).await.expect("relay"),
        1
    );
    let job = queue
        .jobs
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .expect("a job");
    let claim = execution
        .claim(&tenant(), &id, job.generation, "w2")
        .await
        .expect("the new attempt claims");
    assert_eq!(claim.attempt, 1, "the parked attempt did not count");
    let got = execution
        .ask(
            &tenant(),
            &id,
            &claim.lease_token,
            &input_key("k"),
            &confirm_question("Proceed?"),
        )
        .await
        .expect("ask again");
    assert_eq!(got, Some(accept_ok()));
    store
        .store_result(&all(), &id, result(&claim.lease_token))
        .await
        .expect("the result");
}

/// A park and an answer that cross: the task goes on either way.
pub async fn an_answer_before_the_park_dispatches_at_once(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let (id, lease) = running(&stores).await;
    execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("k"),
            &confirm_question("Go?"),
        )
        .await
        .expect("ask");
    store
        .answer_questions(&all(), &id, vec![(input_key("k"), accept_ok())])
        .await
        .expect("answer");
    let outcome = execution
        .release(&tenant(), &id, &lease, ReleaseReason::Parked, "waited")
        .await
        .expect("release");
    assert!(
        matches!(outcome, ReleaseOutcome::Retry { .. }),
        "answered already: dispatched again, not parked ({outcome:?})"
    );
}

/// Cancelling, deleting or expiring a task takes its questions along; a
/// finished task takes no answers.
pub async fn questions_go_with_their_task(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let (store, execution) = (&stores.store, &stores.execution);
    let (id, lease) = running(&stores).await;
    execution
        .ask(
            &tenant(),
            &id,
            &lease,
            &input_key("k"),
            &confirm_question("Still there?"),
        )
        .await
        .expect("ask");
    store.cancel_task(&all(), &id).await.expect("cancel");
    assert_err!(
        store
            .answer_questions(&all(), &id, vec![(input_key("k"), accept_ok())])
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        execution
            .ask(
                &tenant(),
                &id,
                &lease,
                &input_key("k"),
                &confirm_question("Still there?")
            )
            .await,
        StoreError::FailedPrecondition(_)
    );
    store.delete_task(&all(), &id).await.expect("delete");
    assert_err!(store.questions(&all(), &id).await, StoreError::NotFound);

    // An expired task's id reused: the new task starts without questions.
    let short = NewTask {
        ttl: Some(ttl(400)).into(),
        dispatch: Some(taskstore::domain::DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: taskstore::domain::ToolName::parse("echo").expect("tool"),
            max_attempts: None,
        }),
        ..task_with_id("short-lived")
    };
    let first = store.create_task(&all(), short).await.expect("create");
    let lease = execution
        .claim(&tenant(), &first.task_id, 1, "w1")
        .await
        .expect("claim")
        .lease_token;
    execution
        .ask(
            &tenant(),
            &first.task_id,
            &lease,
            &input_key("k"),
            &confirm_question("Old?"),
        )
        .await
        .expect("ask");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let again = store
        .create_task(&all(), task_with_id("short-lived"))
        .await
        .expect("the expired id is free");
    assert!(
        store
            .questions(&all(), &again.task_id)
            .await
            .expect("list")
            .is_empty(),
        "the old task's questions went with it"
    );
}
