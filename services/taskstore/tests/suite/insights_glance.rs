//! The dashboard's other reads on every backend: the overview (statuses,
//! open questions, recent failures by tool, the last 60 minutes), the
//! questions waiting for an answer, one task in detail; and, for every
//! read, that expired tasks and other tenants' tasks are not there.

use chrono::{TimeDelta, Utc};
use taskstore::StoreError;
use taskstore::domain::{
    InputKey, InputRequest, JsonObject, OVERVIEW_MINUTES, Overview, ResultStatus, TaskSearch,
    TaskStatus, TraceContext, epoch_minute,
};
use taskstore::store::StoreConfig;

use super::insights::{Insights, calling, dispatched_to, named, other_tenant, search_all, tool};
use super::*;
use crate::assert_err;
use crate::common::{Backend, Stores};

fn key(k: &str) -> InputKey {
    InputKey::parse(k).expect("key")
}

fn question(message: &str) -> InputRequest {
    InputRequest::parse(format!(
        r#"{{"method":"elicitation/create","params":{{"message":"{message}","requestedSchema":{{"type":"object"}}}}}}"#
    ))
    .expect("request")
}

fn accept() -> JsonObject {
    JsonObject::parse(r#"{"action":"accept"}"#).expect("answer")
}

/// A task of `scope`'s tenant dispatched to `echo`, claimed by `worker`:
/// its id and lease.
async fn running(stores: &Stores, scope: &Scope, id: &str, worker: &str) -> (TaskId, LeaseToken) {
    let task = stores
        .store
        .create_task(scope, named(id, dispatched_to("echo", Some(3))))
        .await
        .expect("create");
    let claim = stores
        .execution
        .claim(&scope.tenant, &task.task_id, 1, worker)
        .await
        .expect("claim");
    (task.task_id, claim.lease_token)
}

async fn ask(stores: &Stores, scope: &Scope, id: &TaskId, lease: &LeaseToken, k: &str) {
    let answer = stores
        .execution
        .ask(&scope.tenant, id, lease, &key(k), &question(k))
        .await
        .expect("ask");
    assert_eq!(answer, None);
}

fn failed(message: &str) -> NewResult {
    NewResult {
        status: ResultStatus::Failed,
        message: Some(message.to_owned()),
        ..completed(r#"{"isError":true,"content":[]}"#)
    }
}

async fn overview_now(insights: &Insights, scope: &Scope) -> Overview {
    insights
        .overview(&scope.tenant, Utc::now())
        .await
        .expect("overview")
}

pub async fn the_overview_counts_statuses_questions_failures_and_minutes(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let (store, insights) = (&stores.store, &stores.insights);
    let mut tasks = vec![create(store, &all()).await, create(store, &all()).await];
    // Two questions, one answered: one open. A cancelled task's open
    // question can never be answered: not counted.
    let (asking, lease) = running(&stores, &all(), "asking", "w-1").await;
    ask(&stores, &all(), &asking, &lease, "q1").await;
    ask(&stores, &all(), &asking, &lease, "q2").await;
    store
        .answer_questions(&all(), &asking, vec![(key("q1"), accept())])
        .await
        .expect("answer");
    let (gave_up, lease) = running(&stores, &all(), "gave-up", "w-1").await;
    ask(&stores, &all(), &gave_up, &lease, "q3").await;
    store.cancel_task(&all(), &gave_up).await.expect("cancel");
    let done = create(store, &all()).await;
    store
        .store_result(&all(), &done.task_id, completed("{}"))
        .await
        .expect("complete");
    for (tool, count) in [(Some("echo"), 2), (Some("resize"), 1), (None, 1)] {
        for _ in 0..count {
            let task = match tool {
                Some(name) => calling(name),
                None => NewTask {
                    request: JsonObject::parse(r#"{"method":"ping"}"#).expect("json"),
                    ..new_task()
                },
            };
            let task = store.create_task(&all(), task).await.expect("create");
            store
                .store_result(&all(), &task.task_id, failed("broken"))
                .await
                .expect("fail");
        }
    }
    // An expired failure counts nowhere.
    let doomed = store
        .create_task(
            &all(),
            NewTask {
                ttl: Some(ttl(150)).into(),
                ..calling("echo")
            },
        )
        .await
        .expect("create");
    store
        .update_status(&all(), &doomed.task_id, status(TaskStatus::Failed, None))
        .await
        .expect("fail");
    sleep_ms(300).await;

    let overview = overview_now(insights, &all()).await;
    assert_eq!(
        overview.by_status,
        vec![
            (TaskStatus::Working, 2),
            (TaskStatus::InputRequired, 1),
            (TaskStatus::Completed, 1),
            (TaskStatus::Failed, 4),
            (TaskStatus::Cancelled, 1),
        ]
    );
    assert_eq!(overview.open_questions, 1);
    assert_eq!(
        overview.failures_by_tool,
        vec![
            (Some(tool("echo")), 2),
            (Some(tool("resize")), 1),
            (None, 1)
        ]
    );

    // The last 60 minutes, each task in the minute it was created (and
    // finished, for the six that are terminal).
    assert_eq!(overview.per_minute.len(), OVERVIEW_MINUTES);
    let last = overview.per_minute[OVERVIEW_MINUTES - 1].minute;
    assert!(last <= Utc::now() && Utc::now() - last < TimeDelta::minutes(2));
    for pair in overview.per_minute.windows(2) {
        assert_eq!(pair[1].minute - pair[0].minute, TimeDelta::minutes(1));
    }
    tasks.clear();
    let everything = search_all(insights, &TaskSearch::default(), 50).await;
    for id in &everything {
        let id = TaskId::parse(id).expect("id");
        tasks.push(store.get_task(&all(), &id).await.expect("get"));
    }
    assert_eq!(tasks.len(), 9);
    for minute in &overview.per_minute {
        let in_minute = |at| epoch_minute(at) == epoch_minute(minute.minute);
        let created = tasks.iter().filter(|t| in_minute(t.created_at)).count();
        let finished = tasks
            .iter()
            .filter(|t| t.status.is_terminal() && in_minute(t.last_updated_at))
            .count();
        assert_eq!(minute.created, created as u64, "{minute:?}");
        assert_eq!(minute.finished, finished as u64, "{minute:?}");
    }
    let total = |f: fn(&taskstore::domain::MinuteCounts) -> u64| {
        overview.per_minute.iter().map(f).sum::<u64>()
    };
    assert_eq!(total(|m| m.created), 9);
    assert_eq!(total(|m| m.finished), 6);

    // Two hours on: the windows are empty, the statuses the same.
    let later = insights
        .overview(&tenant(), Utc::now() + TimeDelta::hours(2))
        .await
        .expect("overview");
    assert_eq!(later.by_status, overview.by_status);
    assert!(later.failures_by_tool.is_empty());
    assert_eq!(later.per_minute.len(), OVERVIEW_MINUTES);
    assert!(
        later
            .per_minute
            .iter()
            .all(|m| m.created == 0 && m.finished == 0)
    );
}

pub async fn waiting_questions_come_oldest_first_with_their_tasks(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let (store, insights) = (&stores.store, &stores.insights);
    let (first, first_lease) = running(&stores, &all(), "first", "w-1").await;
    let (second, second_lease) = running(&stores, &all(), "second", "w-2").await;
    ask(&stores, &all(), &first, &first_lease, "a1").await;
    ask(&stores, &all(), &second, &second_lease, "b1").await;
    ask(&stores, &all(), &first, &first_lease, "a2").await;
    let waiting = |limit| async move {
        insights
            .waiting_questions(&tenant(), limit)
            .await
            .expect("waiting")
            .into_iter()
            .map(|w| {
                assert_eq!(w.task.status, TaskStatus::InputRequired);
                assert!(w.question.answer.is_none());
                format!("{}/{}", w.task.task_id, w.question.key)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(waiting(10).await, ["first/a1", "second/b1", "first/a2"]);
    assert_eq!(waiting(2).await, ["first/a1", "second/b1"]);
    let all_waiting = insights
        .waiting_questions(&tenant(), 10)
        .await
        .expect("waiting");
    assert_eq!(all_waiting[1].question.request, question("b1"));
    assert_eq!(
        all_waiting[1].task,
        store.get_task(&all(), &second).await.expect("get")
    );

    store
        .answer_questions(&all(), &first, vec![(key("a1"), accept())])
        .await
        .expect("answer");
    assert_eq!(waiting(10).await, ["second/b1", "first/a2"]);
    // A terminal task waits for nothing.
    store.cancel_task(&all(), &second).await.expect("cancel");
    assert_eq!(waiting(10).await, ["first/a2"]);
    assert_eq!(waiting(u32::MAX).await, ["first/a2"], "capped, not refused");
}

pub async fn task_details_carry_request_result_questions_and_attempt(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let (store, insights) = (&stores.store, &stores.insights);
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let request = dispatched_to("echo", Some(3));
    let request_json = request.request.as_str().to_owned();
    let created = store
        .create_task(
            &all(),
            NewTask {
                trace_context: TraceContext::parse(traceparent),
                ..named("detailed", request)
            },
        )
        .await
        .expect("create");
    let id = created.task_id.clone();
    let details = insights
        .task_details(&tenant(), &id)
        .await
        .expect("details");
    assert_eq!(details.task, created);
    assert_eq!(details.request_json, request_json, "as the caller sent it");
    assert_eq!((details.attempt, details.max_attempts), (0, Some(3)));
    assert_eq!(details.lease_owner, None);
    assert_eq!(details.result, None);
    assert_eq!(
        details.trace.as_ref().map(|t| t.as_str()),
        Some(traceparent)
    );

    let lease = stores
        .execution
        .claim(&tenant(), &id, 1, "w-9")
        .await
        .expect("claim")
        .lease_token;
    ask(&stores, &all(), &id, &lease, "q1").await;
    store
        .answer_questions(&all(), &id, vec![(key("q1"), accept())])
        .await
        .expect("answer");
    let running = insights
        .task_details(&tenant(), &id)
        .await
        .expect("details");
    assert_eq!((running.attempt, running.max_attempts), (1, Some(3)));
    assert_eq!(running.lease_owner.as_deref(), Some("w-9"));
    assert!(running.lease_expires_at.is_some_and(|at| at > Utc::now()));
    assert_eq!(running.questions.len(), 1);
    assert_eq!(running.questions[0].key, key("q1"));
    assert_eq!(
        running.questions[0].answer.as_ref().map(|a| &a.result),
        Some(&accept())
    );

    let result = r#"{"content":[{"type":"text","text":"done"}]}"#;
    store
        .store_result(
            &all(),
            &id,
            NewResult {
                lease: Some(lease),
                ..completed(result)
            },
        )
        .await
        .expect("complete");
    let finished = insights
        .task_details(&tenant(), &id)
        .await
        .expect("details");
    assert_eq!(finished.task.status, TaskStatus::Completed);
    let stored = finished.result.expect("a result");
    assert_eq!(stored.result.as_str(), result);
    assert_eq!(stored.task, finished.task);
    assert_eq!(finished.questions, running.questions);
    assert_eq!(finished.request_json, request_json);

    let plain = create(store, &all()).await;
    let details = insights
        .task_details(&tenant(), &plain.task_id)
        .await
        .expect("details");
    assert_eq!((details.attempt, details.max_attempts), (0, None));
    assert!(details.questions.is_empty() && details.trace.is_none());
    assert_err!(
        insights
            .task_details(&tenant(), &TaskId::parse("missing").expect("id"))
            .await,
        StoreError::NotFound
    );
}

pub async fn expired_and_other_tenants_tasks_are_in_no_read(backend: &dyn Backend) {
    let stores = backend.stores(StoreConfig::default()).await;
    let (store, insights) = (&stores.store, &stores.insights);
    let other = other_tenant();
    // The other tenant: a failed task, a task with an open question.
    let theirs = store
        .create_task(&other, named("theirs", calling("echo")))
        .await
        .expect("create");
    store
        .store_result(&other, &theirs.task_id, failed("broken"))
        .await
        .expect("fail");
    let (asking, lease) = running(&stores, &other, "their-question", "w-1").await;
    ask(&stores, &other, &asking, &lease, "q").await;
    // Ours: one kept, one that expires with an open question.
    let ours = create(store, &all()).await;
    let doomed = store
        .create_task(
            &all(),
            NewTask {
                ttl: Some(ttl(300)).into(),
                ..named("doomed", dispatched_to("echo", None))
            },
        )
        .await
        .expect("create");
    let lease = stores
        .execution
        .claim(&tenant(), &doomed.task_id, 1, "w-1")
        .await
        .expect("claim")
        .lease_token;
    ask(&stores, &all(), &doomed.task_id, &lease, "q").await;
    // Before it expires, it is everywhere.
    let everything = TaskSearch::default();
    let before = search_all(insights, &everything, 10).await;
    assert_eq!(before, ["doomed", ours.task_id.as_str()]);
    assert_eq!(overview_now(insights, &all()).await.open_questions, 1);
    assert_eq!(
        insights
            .waiting_questions(&tenant(), 10)
            .await
            .expect("waiting")
            .len(),
        1
    );
    sleep_ms(500).await;

    assert_eq!(
        search_all(insights, &everything, 10).await,
        [ours.task_id.as_str()]
    );
    let overview = overview_now(insights, &all()).await;
    assert_eq!(overview.by_status[0], (TaskStatus::Working, 1));
    let total: u64 = overview.by_status.iter().map(|(_, n)| n).sum();
    assert_eq!(total, 1, "neither expired nor other tenants' tasks");
    assert_eq!(overview.open_questions, 0);
    assert!(overview.failures_by_tool.is_empty());
    assert_eq!(
        overview.per_minute.iter().map(|m| m.created).sum::<u64>(),
        1
    );
    assert!(
        insights
            .waiting_questions(&tenant(), 10)
            .await
            .expect("waiting")
            .is_empty()
    );
    for id in [&doomed.task_id, &theirs.task_id, &asking] {
        assert_err!(
            insights.task_details(&tenant(), id).await,
            StoreError::NotFound
        );
    }
    // The other tenant sees its own, and only its own.
    let their_view = insights
        .search_tasks(
            &other.tenant,
            &everything,
            &taskstore::domain::SearchPage::new(None, None),
        )
        .await
        .expect("search");
    assert_eq!(ids(&their_view.tasks), ["their-question", "theirs"]);
    let their_overview = overview_now(insights, &other).await;
    assert_eq!(their_overview.open_questions, 1);
    assert_eq!(
        their_overview.failures_by_tool,
        vec![(Some(tool("echo")), 1)]
    );
    let their_questions = insights
        .waiting_questions(&other.tenant, 10)
        .await
        .expect("waiting");
    assert_eq!(their_questions.len(), 1);
    assert_eq!(their_questions[0].task.task_id, asking);
    assert!(insights.task_details(&other.tenant, &asking).await.is_ok());
    assert_err!(
        insights.task_details(&other.tenant, &ours.task_id).await,
        StoreError::NotFound
    );
}
