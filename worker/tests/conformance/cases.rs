//! Cases 1–3, 5–7 and 10 of `docs/worker-conformance.md`: what a worker
//! does with a task while nothing fails around it. Each case gets its own
//! service, schema and queues, and a worker process of the language under
//! test.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;

use crate::fleet::{CONF_TOOLS, Fleet, Language, accept, text};

const WAIT: Duration = Duration::from_secs(30);

/// Case 1: `conf_echo` → COMPLETED with the text, in one attempt.
pub async fn a_result(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "echoer", 1, "2s", 1).await;
    let said = format!("hello from the {} worker ✓", language.name());
    let id = fleet
        .dispatch("conf_echo", json!({ "text": said }), None)
        .await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done)),
        (pb::TaskStatus::Completed, said)
    );
    let body: Value = serde_json::from_str(&done.result_json).expect("JSON");
    assert_ne!(body["isError"], true, "not an error: {body}");
    assert_eq!(
        fleet.attempts(&id).await,
        (1, None),
        "one attempt, no lease left"
    );
    fleet.cleanup().await;
}

/// Case 2: `conf_tool_error` → FAILED after one attempt, its result stored.
pub async fn a_tool_error(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "failer", 1, "2s", 1).await;
    let id = fleet.dispatch("conf_tool_error", json!({}), Some(3)).await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(done.status(), pb::TaskStatus::Failed);
    let body: Value = serde_json::from_str(&done.result_json).expect("JSON");
    assert_eq!(body["isError"], true, "{body}");
    assert_eq!(text(&done), "tool error");
    assert_eq!(
        fleet.attempts(&id).await.0,
        1,
        "a tool error is not retried"
    );
    fleet.cleanup().await;
}

/// `conf_back_off {wait_ms: 1500}`, with one attempt: the tool's back-off
/// holds the task (and its tool) until its time, and spends no attempt, so
/// the run after it completes the task on attempt 1 of 1.
pub async fn a_back_off_waits_and_spends_no_attempt(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "backer", 1, "2s", 1).await;
    let dispatched_at = Instant::now();
    let id = fleet
        .dispatch("conf_back_off", json!({"wait_ms": 1500}), Some(1))
        .await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done).as_str()),
        (pb::TaskStatus::Completed, "ran after backing off")
    );
    assert!(
        dispatched_at.elapsed() >= Duration::from_millis(1500),
        "ran again {:?} after its dispatch, before its back-off ended",
        dispatched_at.elapsed()
    );
    assert_eq!(
        fleet.attempts(&id).await.0,
        1,
        "the back-off spent no attempt"
    );
    fleet.cleanup().await;
}

/// Case 3: `conf_retryable {fail_times: 2}` with 3 attempts → COMPLETED on the
/// third.
pub async fn a_retryable_failure_retried(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "retrier", 1, "2s", 1).await;
    let id = fleet
        .dispatch("conf_retryable", json!({"fail_times": 2}), Some(3))
        .await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done).as_str()),
        (pb::TaskStatus::Completed, "succeeded on attempt 3")
    );
    assert_eq!(fleet.attempts(&id).await.0, 3);

    // Out of attempts, the last retryable message is the reason.
    let id = fleet
        .dispatch("conf_retryable", json!({"fail_times": 5}), Some(2))
        .await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(done.status(), pb::TaskStatus::Failed);
    let message = done.task.and_then(|t| t.status_message).unwrap_or_default();
    assert!(
        message.contains("failed after 2 attempts: failing attempt 2"),
        "{message}"
    );

    // The tool declares its retry policy (4 attempts, 50 to 100 ms apart,
    // no run after a lost worker): the service lists it as declared, and a
    // task that asks for no number gets its 4 attempts (the service's own
    // default is 3).
    let listed = fleet
        .client
        .clone()
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("list tools")
        .into_inner()
        .tools;
    let retry = listed
        .iter()
        .find_map(|tool| {
            tool.description
                .as_ref()
                .filter(|d| d.name == "conf_retryable")
        })
        .and_then(|description| description.retry);
    let ms = |ms: i64| prost_types::Duration {
        seconds: ms / 1000,
        nanos: i32::try_from(ms % 1000 * 1_000_000).expect("nanos"),
    };
    assert_eq!(
        retry,
        Some(pb::RetryPolicy {
            max_attempts: Some(4),
            backoff_base: Some(ms(50)),
            backoff_max: Some(ms(100)),
            retry_errors: None,
            retry_lost_workers: Some(false),
        }),
        "the declared policy, as listed"
    );
    let id = fleet
        .dispatch("conf_retryable", json!({"fail_times": 3}), None)
        .await;
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done).as_str()),
        (pb::TaskStatus::Completed, "succeeded on attempt 4")
    );
    fleet.cleanup().await;
}

/// Case 5: A running `conf_sleep` cancelled → its tool stops within a second:
/// the worker's only slot runs the next task at once, nothing is stored.
/// The task waits in the queue before the worker starts: its claim, the
/// worker's first, is in the worker's session all the same (the session
/// opens before the worker takes jobs).
pub async fn cancellation_within_a_second(language: Language) {
    let fleet = Fleet::start().await;
    let sleeper = fleet
        .dispatch("conf_sleep", json!({"ms": 60000}), None)
        .await;
    let _worker = fleet.start_worker(language, "canceller", 1, "2s", 1).await;
    fleet
        .until("the sleep runs", &sleeper, WAIT, |t| {
            t.status_message
                .as_deref()
                .is_some_and(|m| m.starts_with("step"))
        })
        .await;
    assert!(
        fleet.claimed_in_a_live_session(&sleeper).await,
        "the worker claims in a session it renews"
    );
    // The only slot is busy: this one waits for it.
    let next = fleet
        .dispatch("conf_echo", json!({"text": "the slot is free"}), None)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        fleet.attempts(&next).await.0,
        0,
        "the echo waits while the sleep holds the only slot"
    );

    let cancelled_at = Instant::now();
    let task = fleet
        .client
        .clone()
        .cancel_task(pb::CancelTaskRequest {
            task_id: sleeper.clone(),
            session_id: None,
        })
        .await
        .expect("cancel")
        .into_inner();
    assert_eq!(task.status(), pb::TaskStatus::Cancelled);
    let done = fleet.result(&next, WAIT).await;
    let took = cancelled_at.elapsed();
    assert_eq!(text(&done), "the slot is free");
    assert!(
        took < Duration::from_millis(1500),
        "the cancelled tool held its slot for {took:?}: it must stop within 1 s (and the freed slot run the next task at once)"
    );
    let task = fleet.get(&sleeper).await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Cancelled,
        "nothing stored after the cancel"
    );
    let no_result = fleet
        .client
        .clone()
        .get_task_result(pb::GetTaskResultRequest {
            task_id: sleeper.clone(),
            session_id: None,
            wait: false,
        })
        .await
        .expect_err("a cancelled task has no result");
    assert_eq!(no_result.code(), tonic::Code::FailedPrecondition);
    assert_eq!(
        fleet.attempts(&sleeper).await,
        (1, None),
        "the lease is gone"
    );
    fleet.cleanup().await;
}

/// Case 6: `conf_sleep {ms: 600}`'s progress reaches a watcher, step by step.
pub async fn progress_seen_by_a_watcher(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "reporter", 1, "2s", 1).await;
    // Every change of the tenant's tasks, from before the task exists.
    let mut changes = fleet
        .client
        .clone()
        .watch_tasks(pb::WatchTasksRequest { session_id: None })
        .await
        .expect("WatchTasks")
        .into_inner();
    let id = fleet.dispatch("conf_sleep", json!({"ms": 600}), None).await;
    let mut steps = Vec::new();
    loop {
        let event = tokio::time::timeout(WAIT, changes.next())
            .await
            .expect("the watch stalled")
            .expect("the watch ended")
            .expect("an event");
        let Some(pb::task_event::Event::Changed(task)) = event.event else {
            continue;
        };
        if task.task_id != id {
            continue;
        }
        if let Some(step) = task
            .status_message
            .as_deref()
            .and_then(|m| m.strip_prefix("step "))
        {
            steps.push(step.parse::<u32>().expect("step <i>"));
        }
        if task.status() == pb::TaskStatus::Completed {
            break;
        }
    }
    assert_eq!(steps.first(), Some(&1), "step 1 comes first: {steps:?}");
    assert!(
        steps.windows(2).all(|w| w[0] < w[1]) && steps.len() >= 4,
        "steps 1…6 in order (a few may be coalesced): {steps:?}"
    );
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(text(&done), "slept 600 ms");

    // A plain WatchTask of a running task sees its progress too.
    let id = fleet
        .dispatch("conf_sleep", json!({"ms": 1500, "step_ms": 250}), None)
        .await;
    let mut watch = fleet
        .client
        .clone()
        .watch_task(pb::WatchTaskRequest {
            lease_token: None,
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("WatchTask")
        .into_inner();
    let mut seen = Vec::new();
    while let Some(task) = tokio::time::timeout(WAIT, watch.next())
        .await
        .expect("the watch stalled")
    {
        let task = task.expect("task");
        seen.extend(task.status_message.clone());
        if task.status() == pb::TaskStatus::Completed {
            break;
        }
    }
    assert!(
        seen.iter().filter(|m| m.starts_with("step ")).count() >= 3,
        "{seen:?}"
    );
    fleet.cleanup().await;
}

/// Case 7: `conf_ask` → INPUT_REQUIRED with its question; the answer →
/// COMPLETED `answered accept`.
pub async fn a_question_answered(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "asker", 1, "2s", 1).await;
    let id = fleet.dispatch("conf_ask", json!({}), None).await;
    fleet
        .until("the tool asks", &id, WAIT, |t| {
            t.status() == pb::TaskStatus::InputRequired
        })
        .await;
    let asked = fleet
        .client
        .clone()
        .list_input_requests(pb::ListInputRequestsRequest {
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("ListInputRequests")
        .into_inner()
        .input_requests;
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].key, "confirm");
    let request: Value = serde_json::from_str(&asked[0].request_json).expect("JSON");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["message"], "Proceed?", "{request}");
    assert_eq!(
        request["params"]["requestedSchema"],
        json!({"type": "object", "properties": {}}),
        "{request}"
    );
    let answered = fleet
        .client
        .clone()
        .answer_input_requests(pb::AnswerInputRequestsRequest {
            task_id: id.clone(),
            session_id: None,
            answers_json: [("confirm".to_owned(), accept().to_string())].into(),
        })
        .await
        .expect("answer")
        .into_inner();
    assert_eq!(answered.taken, ["confirm"], "{answered:?}");
    let done = fleet.result(&id, WAIT).await;
    assert_eq!(
        (done.status(), text(&done).as_str()),
        (pb::TaskStatus::Completed, "answered accept")
    );
    assert_eq!(fleet.attempts(&id).await.0, 1, "answered while it waited");
    fleet.cleanup().await;
}

/// Case 10: The worker's heartbeat carries its tools and their descriptions:
/// `ListTools` and `taskstore status` show them and its slots.
pub async fn tools_appear(language: Language) {
    let fleet = Fleet::start().await;
    let _worker = fleet.start_worker(language, "describer", 3, "2s", 1).await;
    let deadline = tokio::time::Instant::now() + WAIT;
    let tools = loop {
        let tools = fleet
            .client
            .clone()
            .list_tools(pb::ListToolsRequest {})
            .await
            .expect("ListTools")
            .into_inner()
            .tools;
        let described = |name: &&str| {
            tools
                .iter()
                .any(|t| t.name == *name && t.workers >= 1 && t.description.is_some())
        };
        if CONF_TOOLS.iter().all(described) {
            break tools;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "ListTools never showed every conformance tool described: {tools:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    for name in CONF_TOOLS {
        let tool = tools.iter().find(|t| t.name == *name).expect("listed");
        let description = tool.description.as_ref().expect("described");
        assert!(
            !description.description.is_empty(),
            "{name}: {description:?}"
        );
        let schema: Value = serde_json::from_str(&description.input_schema_json)
            .unwrap_or_else(|err| panic!("{name}'s input schema: {err}"));
        assert_eq!(schema["type"], "object", "{name}: {schema}");
        assert_eq!(
            tool.slots, 3,
            "{name}: the worker's --concurrency: {tool:?}"
        );
        if *name == "conf_echo" {
            assert!(schema["properties"]["text"].is_object(), "{schema}");
        }
    }

    let status = fleet.status_json();
    let workers = status["workers"].as_array().cloned().unwrap_or_default();
    let me = workers
        .iter()
        .find(|w| w["workerId"] == "describer")
        .unwrap_or_else(|| panic!("taskstore status shows the worker: {status}"));
    assert_eq!(me["slots"], 3, "{me}");
    let served: Vec<&str> = me["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for name in CONF_TOOLS {
        assert!(served.contains(name), "{name} in {me}");
    }
    fleet.cleanup().await;
}
