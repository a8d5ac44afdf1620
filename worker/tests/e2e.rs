//! Dispatched tasks end to end: the real service and workers over real
//! PostgreSQL and RabbitMQ.

mod common;

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
    let id = dispatch(
        &mut client,
        "sleep",
        json!({"ms": 2500, "ask": "which file?"}),
        None,
    )
    .await;
    let mut watch = client
        .watch_task(pb::WatchTaskRequest {
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
    let _worker = env.start_worker("worker-a", "none", Some(&tools), &[]);
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
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["patient"]).await;
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

/// The README's walkthrough, through the `taskstore` CLI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_walkthrough_works_from_the_cli() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _one = env.start_worker("one", "echo,sleep,fail,hash", None, &[]);
    let _two = env.start_worker("two", "echo,sleep,fail,hash", None, &[]);
    let cli = |args: &[&str]| {
        let output = std::process::Command::new(common::taskstore_binary())
            .args(args)
            .args(["--endpoint", &env.endpoint])
            .output()
            .expect("run the CLI");
        assert!(
            output.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("utf-8")
    };
    let created: serde_json::Value = serde_json::from_str(&cli(&[
        "create",
        "--tool",
        "hash",
        "--arguments",
        r#"{"items":200000}"#,
        "--dispatch",
        "--json",
    ]))
    .expect("json");
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    let watched = cli(&["watch", &id]);
    assert!(watched.contains(" of 200000 items"), "{watched}");
    assert!(
        watched
            .lines()
            .last()
            .is_some_and(|l| l.contains("completed")),
        "{watched}"
    );
    let result: serde_json::Value =
        serde_json::from_str(&cli(&["result", &id, "--wait", "--json"])).expect("json");
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("sha256 chain of 200000 items")
    );

    let created: serde_json::Value = serde_json::from_str(&cli(&[
        "create",
        "--tool",
        "sleep",
        "--arguments",
        r#"{"ms":600000}"#,
        "--dispatch",
        "--json",
    ]))
    .expect("json");
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    let mut client = env.client().await;
    eventually("the sleep runs", Duration::from_secs(20), || {
        let mut client = client.clone();
        let id = id.clone();
        async move { common::is_running(&mut client, &id).await }
    })
    .await;
    assert!(cli(&["cancel", &id]).contains("cancelled"));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(
        get(&mut client, &id).await.status(),
        pb::TaskStatus::Cancelled
    );
    env.cleanup(BUILTINS).await;
}
