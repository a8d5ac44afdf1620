//! Command tools as their guide (docs/command-tools.md) describes them: the
//! line protocol's progress messages, `env` and `cwd`, paths beside the
//! tools file, a retry exit status, a timeout, a tool's own retry policy,
//! and failures that say why.

use std::time::Duration;

use serde_json::json;
use taskstore_proto::v1 as pb;

use crate::common::{Env, dispatch, eventually, get, result, text_of};

const SCRIPT: &str = r#"#!/bin/sh
# A tool beside its tools file, started in work/ (its cwd).
read -r arguments
case "$arguments" in
  *progress*)
    echo '{"taskstore":"progress","message":"copying","progress":1,"total":2}' >&2
    sleep 3
    echo done ;;
  *environment*)
    echo "greeting=$GREETING task=$TASKSTORE_TASK_ID protocol=$TASKSTORE_PROTOCOL amqp=${TASKWORKER_AMQP_URL:-unset} cwd=$(pwd)" ;;
  *flaky*)
    if [ "$TASKSTORE_ATTEMPT" = 1 ]; then echo 'busy, later' >&2; exit 75; fi
    echo "done on attempt $TASKSTORE_ATTEMPT of $TASKSTORE_MAX_ATTEMPTS" ;;
  *slow*)
    sleep 30 ;;
  *broken-protocol*)
    echo '{"taskstore":"progress","total":0}' >&2 ;;
  *)
    echo 'partial output'
    echo 'reading input' >&2
    echo 'disk full' >&2
    exit 3 ;;
esac
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_tools_speak_the_line_protocol_and_say_why_they_fail() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-protocol-{}", env.prefix));
    std::fs::create_dir_all(dir.join("work")).expect("temp dirs");
    let script = dir.join("tool.sh");
    std::fs::write(&script, SCRIPT).expect("script");
    let tools = dir.join("tools.json");
    let command = ["sh", script.to_str().expect("utf-8 path")];
    std::fs::write(
        &tools,
        json!({"tools": {
            "scripted": {"command": command, "cwd": "work", "env": {"GREETING": "hello"}},
            "bounded": {"command": command, "timeout": "1s"},
            // A relative program path: beside the tools file, wherever
            // the worker runs.
            "beside": {"command": ["./tool.sh"]},
            // Retry policies of their own, sent with their descriptions.
            "patient": {"command": command, "retry": {
                "max_attempts": 4, "backoff_base": "50ms", "backoff_max": "100ms"}},
            "strict": {"command": command, "retry": {"retry_errors": false}},
        }})
        .to_string(),
    )
    .expect("tools file");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let _worker = env.start_worker("worker-protocol", "none", Some(&tools), &[]);
    for tool in ["scripted", "bounded", "beside", "patient", "strict"] {
        env.wait_for_consumers(tool, 1).await;
    }
    let mut client = env.client().await;
    let wait = Duration::from_secs(30);

    // Progress messages become the status message, numbers and all.
    let id = dispatch(&mut client, "scripted", json!({"mode": "progress"}), None).await;
    eventually("the progress message shows", wait, || {
        let mut client = client.clone();
        let id = id.clone();
        async move { get(&mut client, &id).await.status_message.as_deref() == Some("copying (1/2)") }
    })
    .await;
    let progressed = result(&mut client, &id, wait).await;
    assert_eq!(text_of(&progressed.result_json), "done");

    let id = dispatch(
        &mut client,
        "scripted",
        json!({"mode": "environment"}),
        None,
    )
    .await;
    let done = result(&mut client, &id, wait).await;
    let text = text_of(&done.result_json);
    let work = dir.join("work").canonicalize().expect("work dir");
    assert_eq!(
        text,
        format!(
            "greeting=hello task={id} protocol=1 amqp=unset cwd={}",
            work.display()
        ),
        "env on top of the worker's, its own variables removed, cwd beside the tools file"
    );

    let id = dispatch(&mut client, "scripted", json!({"mode": "flaky"}), Some(3)).await;
    let retried = result(&mut client, &id, wait).await;
    assert_eq!(retried.status(), pb::TaskStatus::Completed);
    assert_eq!(text_of(&retried.result_json), "done on attempt 2 of 3");

    // A task that asks for no number gets its tool's attempts.
    let id = dispatch(&mut client, "patient", json!({"mode": "flaky"}), None).await;
    let retried = result(&mut client, &id, wait).await;
    assert_eq!(text_of(&retried.result_json), "done on attempt 2 of 4");
    let id = dispatch(&mut client, "strict", json!({"mode": "flaky"}), None).await;
    let refused = result(&mut client, &id, wait).await;
    assert_eq!(refused.status(), pb::TaskStatus::Failed);
    let message = get(&mut client, &id)
        .await
        .status_message
        .unwrap_or_default();
    assert!(
        message.contains("busy, later") && message.ends_with("(its tool retries no errors)"),
        "{message}"
    );

    let id = dispatch(&mut client, "bounded", json!({"mode": "slow"}), Some(1)).await;
    let slow = result(&mut client, &id, wait).await;
    assert_eq!(slow.status(), pb::TaskStatus::Failed);
    let message = get(&mut client, &id)
        .await
        .status_message
        .unwrap_or_default();
    assert!(message.contains("timed out after 1s"), "{message}");

    let id = dispatch(&mut client, "scripted", json!({"mode": "fails"}), None).await;
    let failed = result(&mut client, &id, wait).await;
    assert_eq!(failed.status(), pb::TaskStatus::Failed);
    let body: serde_json::Value = serde_json::from_str(&failed.result_json).expect("json");
    assert_eq!(body["isError"], true);
    assert_eq!(
        body["content"][0]["text"], "sh exited with exit status: 3: disk full",
        "the reason: the exit status and the last stderr line"
    );
    assert_eq!(
        body["content"][1]["text"], "partial output",
        "and what it printed"
    );
    assert_eq!(
        get(&mut client, &id).await.status_message.as_deref(),
        Some("sh exited with exit status: 3: disk full"),
        "the status message says why"
    );

    let id = dispatch(
        &mut client,
        "scripted",
        json!({"mode": "broken-protocol"}),
        None,
    )
    .await;
    let broken = result(&mut client, &id, wait).await;
    assert_eq!(broken.status(), pb::TaskStatus::Failed);
    assert!(
        text_of(&broken.result_json).contains("broke the line protocol"),
        "{}",
        broken.result_json
    );

    let id = dispatch(&mut client, "beside", json!({"mode": "environment"}), None).await;
    let beside = result(&mut client, &id, wait).await;
    assert_eq!(
        beside.status(),
        pb::TaskStatus::Completed,
        "{}",
        beside.result_json
    );
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["scripted", "bounded", "beside", "patient", "strict"])
        .await;
}
