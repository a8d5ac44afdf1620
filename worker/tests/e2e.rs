//! Dispatched tasks end to end: the real service and workers over real
//! PostgreSQL and RabbitMQ.

#[path = "e2e/broker_tls.rs"]
mod broker_tls;
#[path = "e2e/command_tools.rs"]
mod command_tools;
mod common;
#[path = "e2e/fairness.rs"]
mod fairness;
#[path = "e2e/limits.rs"]
mod limits;
#[path = "e2e/lost_jobs.rs"]
mod lost_jobs;
#[path = "e2e/questions.rs"]
mod questions;
#[path = "e2e/readme.rs"]
mod readme;
#[path = "e2e/secured.rs"]
mod secured;
#[path = "e2e/startup.rs"]
mod startup;
#[path = "e2e/tenants.rs"]
mod tenants;

use std::time::Duration;

use common::{Env, dispatch, eventually, get, result, text_of};
use serde_json::json;
use taskstore_proto::v1 as pb;
use tokio_stream::StreamExt;

const BUILTINS: &[&str] = &["echo", "sleep", "fail", "hash", "nobody"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_run_on_workers_and_report_back() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _a = env.start_worker("worker-a", "echo,sleep,fail,hash", None, &[]);
    let _b = env.start_worker("worker-b", "echo,sleep,fail,hash", None, &[]);
    let mut client = env.client().await;
    let wait = Duration::from_secs(30);

    let echo = dispatch(&mut client, "echo", json!({"text": "hi"}), None).await;
    let hash = dispatch(&mut client, "hash", json!({"items": 2000}), None).await;
    let broken = dispatch(&mut client, "fail", json!({"message": "boom"}), None).await;
    let flaky = dispatch(
        &mut client,
        "fail",
        json!({"retryable": true, "until_attempt": 1}),
        None,
    )
    .await;
    let hopeless = dispatch(
        &mut client,
        "fail",
        json!({"retryable": true, "message": "still down"}),
        Some(2),
    )
    .await;

    let done = result(&mut client, &echo, wait).await;
    assert_eq!(
        (done.status(), text_of(&done.result_json).as_str()),
        (pb::TaskStatus::Completed, "hi")
    );
    let done = result(&mut client, &hash, wait).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    assert!(text_of(&done.result_json).starts_with("sha256 chain of 2000 items: "));

    let failed = result(&mut client, &broken, wait).await;
    assert_eq!(failed.status(), pb::TaskStatus::Failed);
    assert_eq!(
        failed
            .task
            .as_ref()
            .and_then(|t| t.status_message.clone())
            .as_deref(),
        Some("boom")
    );
    let body: serde_json::Value = serde_json::from_str(&failed.result_json).expect("json");
    assert_eq!(body["isError"], true);

    let retried = result(&mut client, &flaky, wait).await;
    assert_eq!(
        (retried.status(), text_of(&retried.result_json).as_str()),
        (pb::TaskStatus::Completed, "succeeded on attempt 2")
    );
    let exhausted = result(&mut client, &hopeless, wait).await;
    assert_eq!(exhausted.status(), pb::TaskStatus::Failed);
    let message = exhausted
        .task
        .and_then(|t| t.status_message)
        .unwrap_or_default();
    assert!(
        message.contains("failed after 2 attempts: still down"),
        "{message}"
    );

    env.cleanup(BUILTINS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_visible_while_a_task_runs() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _worker = env.start_worker("worker-a", "sleep", None, &[]);
    let mut client = env.client().await;
    let id = dispatch(&mut client, "sleep", json!({"ms": 2500}), None).await;
    let mut watch = client
        .watch_task(pb::WatchTaskRequest {
            lease_token: None,
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("watch")
        .into_inner();
    let mut messages = Vec::new();
    while let Some(task) = tokio::time::timeout(Duration::from_secs(30), watch.next())
        .await
        .expect("no stall")
    {
        let task = task.expect("task");
        messages.push(task.status_message.clone().unwrap_or_default());
        if task.status() == pb::TaskStatus::Completed {
            break;
        }
    }
    // (The claim's "running on worker-a" message may be replaced by the
    // tool's first report before a watcher re-reads: watches coalesce.)
    assert!(
        messages.iter().any(|m| m == "slept 1000 of 2500 ms"),
        "{messages:?}"
    );
    assert_eq!(
        text_of(
            &result(&mut client, &id, Duration::from_secs(5))
                .await
                .result_json
        ),
        "slept 2500 ms"
    );
    env.cleanup(&["sleep"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_for_an_unserved_tool_waits_until_a_worker_serves_it() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut client = env.client().await;
    let id = dispatch(&mut client, "echo", json!({"text": "late"}), None).await;
    eventually(
        "the task says it waits for a worker",
        Duration::from_secs(15),
        || {
            let mut client = client.clone();
            let id = id.clone();
            async move {
                get(&mut client, &id).await.status_message.as_deref()
                    == Some("waiting for a worker that serves tool echo")
            }
        },
    )
    .await;
    let _worker = env.start_worker("latecomer", "echo", None, &[]);
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "late");
    env.cleanup(&["echo"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_running_task_stops_its_tool_within_a_second() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-cancel-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let marker = dir.join("stopped");
    let tools = dir.join("tools.json");
    let script = format!(
        "trap 'echo stopped > {}; exit 0' TERM; echo started >&2; sleep 60 & wait",
        marker.display()
    );
    std::fs::write(
        &tools,
        json!({"tools": {"patient": {"command": ["sh", "-c", script], "grace": "5s"}}}).to_string(),
    )
    .expect("tools file");
    let (_worker, mut logs) =
        env.start_worker_logged("worker-a", "none", Some(&tools), &env.endpoint, &[]);
    let mut client = env.client().await;
    let id = dispatch(&mut client, "patient", json!({}), None).await;
    eventually("the command runs", Duration::from_secs(20), || {
        let mut client = client.clone();
        let id = id.clone();
        async move { get(&mut client, &id).await.status_message.as_deref() == Some("started") }
    })
    .await;

    let cancelled_at = std::time::Instant::now();
    client
        .cancel_task(pb::CancelTaskRequest {
            task_id: id.clone(),
            session_id: None,
        })
        .await
        .expect("cancel");
    while !marker.exists() {
        assert!(
            cancelled_at.elapsed() < Duration::from_secs(1),
            "the tool did not see the cancellation within 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let task = get(&mut client, &id).await;
    assert_eq!(
        task.status(),
        pb::TaskStatus::Cancelled,
        "nothing was stored after the cancellation"
    );
    let status = client
        .get_task_result(pb::GetTaskResultRequest {
            task_id: id,
            session_id: None,
            wait: false,
        })
        .await
        .expect_err("no result");
    assert_eq!(status.code(), tonic::Code::FailedPrecondition);
    let stopped = logs.wait_for(Duration::from_secs(5), |e| {
        e["message"] == "attempt stopped; nothing stored"
    });
    assert_eq!(stopped["reason"], "the task was cancelled", "{stopped}");
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["patient"]).await;
}

/// A worker started before its service (or with a wrong `--endpoint`) says
/// so, keeps retrying with backoff, and serves once the service is there.
/// A bare HOST:PORT endpoint means http.
#[tokio::test]
async fn a_worker_says_when_it_cannot_reach_the_service_and_keeps_trying() {
    let mut env = Env::new().await;
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = free.local_addr().expect("addr").to_string();
    drop(free);
    let (mut worker, mut logs) = env.start_worker_logged("early", "echo", None, &address, &[]);
    let unreachable = |e: &serde_json::Value| {
        e["message"].as_str().is_some_and(|m| {
            m.starts_with("cannot reach the taskstore service; is --endpoint right")
        })
    };
    let first = logs.wait_for(Duration::from_secs(10), unreachable);
    assert_eq!(first["endpoint"], address.as_str());
    assert!(
        first["error"]
            .as_str()
            .is_some_and(|e| e.contains("Connection refused")),
        "the cause, not a bare transport error: {first}"
    );
    let second = logs.wait_for(Duration::from_secs(10), unreachable);
    assert!(
        second["retry_in_ms"].as_u64() > first["retry_in_ms"].as_u64(),
        "backoff grows: {first} then {second}"
    );
    assert!(!worker.has_exited(), "it keeps trying");

    env.start_service(&["--listen", &address]);
    logs.wait_for(Duration::from_secs(20), |e| {
        e["message"] == "registered with the taskstore service"
    });
    env.wait_for_consumers("echo", 1).await;
    let mut client = env.client().await;
    let id = dispatch(&mut client, "echo", json!({"text": "late"}), None).await;
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "late");
    worker.signal("-TERM");
    assert!(worker.wait_exit(Duration::from_secs(10)).success());
    env.cleanup(&["echo"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_tools_map_exit_codes_and_output() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-commands-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let tools = dir.join("tools.json");
    let structured = "import json, sys; args = json.load(sys.stdin); \
        print(json.dumps({'content': [{'type': 'text', 'text': 'got %d' % args['n']}]}))";
    std::fs::write(
        &tools,
        json!({"tools": {
            "structured": {"command": ["python3", "-c", structured]},
            "broken": {"command": ["sh", "-c", "echo 'disk full' >&2; exit 3"]},
            "missing": {"command": ["/nonexistent/program"]},
        }})
        .to_string(),
    )
    .expect("tools file");
    let _worker = env.start_worker("worker-a", "none", Some(&tools), &[]);
    let mut client = env.client().await;
    let wait = Duration::from_secs(30);

    let id = dispatch(&mut client, "structured", json!({"n": 1}), None).await;
    let done = result(&mut client, &id, wait).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    assert_eq!(
        text_of(&done.result_json),
        "got 1",
        "arguments on stdin, a CallToolResult on stdout"
    );

    let id = dispatch(&mut client, "broken", json!({}), None).await;
    let failed = result(&mut client, &id, wait).await;
    assert_eq!(failed.status(), pb::TaskStatus::Failed);
    let body: serde_json::Value = serde_json::from_str(&failed.result_json).expect("json");
    assert_eq!(body["isError"], true);
    let text = text_of(&failed.result_json);
    assert!(
        text.contains("exit status: 3") && text.contains("disk full"),
        "{text}"
    );

    let id = dispatch(&mut client, "missing", json!({}), None).await;
    let failed = result(&mut client, &id, wait).await;
    assert_eq!(failed.status(), pb::TaskStatus::Failed);
    assert!(text_of(&failed.result_json).contains("cannot start /nonexistent/program"));
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["structured", "broken", "missing"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_can_declare_classic_queues() {
    let mut env = Env::new().await;
    // The service publishes to classic queues; its workers follow.
    env.start_service(&["--queue-type", "classic"]);
    let _worker = env.start_worker("worker-classic", "echo", None, &["--queue-type", "classic"]);
    env.wait_for_consumers("echo", 1).await;
    let mut client = env.client().await;
    let echo = dispatch(&mut client, "echo", json!({"text": "classic"}), None).await;
    let done = result(&mut client, &echo, Duration::from_secs(30)).await;
    assert_eq!(
        (done.status(), text_of(&done.result_json).as_str()),
        (pb::TaskStatus::Completed, "classic")
    );

    // The queue is a classic one: the broker refuses to call it quorum.
    let connection =
        lapin::Connection::connect(&common::amqp_url(), lapin::ConnectionProperties::default())
            .await
            .expect("connect to RabbitMQ");
    let channel = connection.create_channel().await.expect("channel");
    let mut quorum = lapin::types::FieldTable::default();
    quorum.insert(
        "x-queue-type".into(),
        lapin::types::AMQPValue::LongString("quorum".into()),
    );
    let queue = format!("{}.tool.echo", env.prefix);
    let redeclared = channel
        .queue_declare(
            queue.as_str().into(),
            lapin::options::QueueDeclareOptions {
                durable: true,
                ..Default::default()
            },
            quorum,
        )
        .await;
    let refusal = redeclared.expect_err("a classic queue is not a quorum queue");
    assert!(
        refusal.to_string().contains("PRECONDITION_FAILED"),
        "{refusal}"
    );
    let _ = connection.close(200, "done".into()).await;
    env.cleanup(&["echo"]).await;
}
