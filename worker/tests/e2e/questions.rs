//! Tasks that ask, end to end on real workers: a Rust tool (`sleep`'s
//! `ask`) and an interactive command tool ask, a client answers through
//! the gRPC API, the tool goes on with the answer. A worker killed while
//! it waits leaves the question; the re-run attempt finds its answer
//! without asking twice. A question that waits too long parks the task
//! and its answer dispatches it again.

use std::time::Duration;

use serde_json::json;
use taskstore_proto::v1 as pb;
use taskstore_proto::v1::task_store_client::TaskStoreClient;
use tonic::transport::Channel;

use crate::common::{Env, dispatch, eventually, get, result, text_of};

async fn questions(client: &mut TaskStoreClient<Channel>, id: &str) -> Vec<pb::InputRequest> {
    client
        .list_input_requests(pb::ListInputRequestsRequest {
            task_id: id.to_owned(),
            session_id: None,
        })
        .await
        .expect("list input requests")
        .into_inner()
        .input_requests
}

async fn answer(
    client: &mut TaskStoreClient<Channel>,
    id: &str,
    key: &str,
    answer: serde_json::Value,
) {
    let answered = client
        .answer_input_requests(pb::AnswerInputRequestsRequest {
            task_id: id.to_owned(),
            session_id: None,
            answers_json: [(key.to_owned(), answer.to_string())].into(),
        })
        .await
        .expect("answer")
        .into_inner();
    assert_eq!(answered.taken, [key], "{answered:?}");
}

/// Waits until the task asks (is `input_required` with an open question).
async fn until_asked(client: &TaskStoreClient<Channel>, id: &str) {
    eventually("the task asks", Duration::from_secs(30), || {
        let (mut client, id) = (client.clone(), id.to_owned());
        async move { get(&mut client, &id).await.status() == pb::TaskStatus::InputRequired }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_tool_and_a_command_tool_ask_and_go_on_with_the_answer() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let dir = std::env::temp_dir().join(format!("taskworker-asks-{}", env.prefix));
    std::fs::create_dir_all(&dir).expect("dir");
    let tools = dir.join("tools.json");
    let script = r#"
import json, sys
args = json.loads(sys.stdin.readline())
print(json.dumps({"taskstore": "ask", "key": "name", "request": {
    "method": "elicitation/create",
    "params": {"message": "Your name?", "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string"}}}}}}), file=sys.stderr, flush=True)
answer = json.loads(sys.stdin.readline())
assert answer["taskstore"] == "answer" and answer["key"] == "name", answer
print("hello " + answer["answer"]["content"]["name"])
"#;
    std::fs::write(
        &tools,
        json!({"tools": {"greet": {"command": ["python3", "-c", script], "interactive": true}}})
            .to_string(),
    )
    .expect("tools file");
    let _worker = env.start_worker("worker-asks", "sleep", Some(&tools), &[]);
    let mut client = env.client().await;
    let wait = Duration::from_secs(30);

    let slept = dispatch(
        &mut client,
        "sleep",
        json!({"ms": 10, "ask": "Sleep now?"}),
        None,
    )
    .await;
    until_asked(&client, &slept).await;
    let task = get(&mut client, &slept).await;
    assert_eq!(task.status_message.as_deref(), Some("Sleep now?"));
    let asked = questions(&mut client, &slept).await;
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].key, "ask");
    assert!(asked[0].request_json.contains("elicitation/create"));
    answer(
        &mut client,
        &slept,
        "ask",
        json!({"action": "accept", "content": {}}),
    )
    .await;
    let done = result(&mut client, &slept, wait).await;
    assert_eq!(text_of(&done.result_json), "slept 10 ms");

    let declined = dispatch(
        &mut client,
        "sleep",
        json!({"ms": 10, "ask": "Really?"}),
        None,
    )
    .await;
    until_asked(&client, &declined).await;
    answer(&mut client, &declined, "ask", json!({"action": "decline"})).await;
    let done = result(&mut client, &declined, wait).await;
    assert_eq!(
        text_of(&done.result_json),
        "not slept: the question was declined"
    );

    let greeted = dispatch(&mut client, "greet", json!({}), None).await;
    until_asked(&client, &greeted).await;
    assert_eq!(
        get(&mut client, &greeted).await.status_message.as_deref(),
        Some("Your name?")
    );
    answer(
        &mut client,
        &greeted,
        "name",
        json!({"action": "accept", "content": {"name": "Ada"}}),
    )
    .await;
    let done = result(&mut client, &greeted, wait).await;
    assert_eq!(
        done.status(),
        pb::TaskStatus::Completed,
        "{}",
        done.result_json
    );
    assert_eq!(text_of(&done.result_json), "hello Ada");
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup(&["sleep", "greet"]).await;
}

/// A worker killed while its tool waits: the question stays, is answered
/// with no worker running, and the re-run attempt gets the stored answer
/// at once; one question, one result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_survives_a_killed_worker_and_is_not_asked_twice() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let mut first = env.start_worker("worker-first", "sleep", None, &[]);
    env.wait_for_consumers("sleep", 1).await;
    let mut client = env.client().await;
    let id = dispatch(
        &mut client,
        "sleep",
        json!({"ms": 10, "ask": "Go on?"}),
        None,
    )
    .await;
    until_asked(&client, &id).await;
    first.kill_9();
    answer(
        &mut client,
        &id,
        "ask",
        json!({"action": "accept", "content": {}}),
    )
    .await;
    let _second = env.start_worker("worker-second", "sleep", None, &[]);
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "slept 10 ms");
    let asked = questions(&mut client, &id).await;
    assert_eq!(asked.len(), 1, "asked once: {asked:?}");
    assert!(asked[0].answer_json.is_some());
    env.cleanup(&["sleep"]).await;
}

/// Past `--park-after` the attempt gives its slot back; the task waits
/// without a worker, and its answer dispatches it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_that_waits_long_parks_and_its_answer_resumes_the_task() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let (_worker, mut logs) = env.start_worker_logged(
        "worker-parks",
        "sleep",
        None,
        &env.endpoint.clone(),
        &["--park-after", "1s"],
    );
    env.wait_for_consumers("sleep", 1).await;
    let mut client = env.client().await;
    let id = dispatch(
        &mut client,
        "sleep",
        json!({"ms": 10, "ask": "Later?"}),
        None,
    )
    .await;
    until_asked(&client, &id).await;
    logs.wait_for(Duration::from_secs(30), |event| {
        event["message"] == "no answer yet; parking the attempt"
    });
    logs.wait_for(Duration::from_secs(30), |event| {
        event["message"] == "attempt reported" || event["message"] == "task released"
    });
    let parked = get(&mut client, &id).await;
    assert_eq!(parked.status(), pb::TaskStatus::InputRequired);
    answer(
        &mut client,
        &id,
        "ask",
        json!({"action": "accept", "content": {}}),
    )
    .await;
    let done = result(&mut client, &id, Duration::from_secs(30)).await;
    assert_eq!(text_of(&done.result_json), "slept 10 ms");
    env.cleanup(&["sleep"]).await;
}
