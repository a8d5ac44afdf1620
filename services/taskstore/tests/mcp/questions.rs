//! Tasks that ask, over `/mcp`: in 2025-11-25 the question comes as a
//! request on the `tasks/result` stream and the client's response, POSTed
//! to another replica, reaches it (forged, tampered and foreign responses
//! change nothing); in 2026-07-28 `tasks/get` inlines the questions and
//! `tasks/update` answers them, partly or wholly; a synchronous call that
//! needs input answers `input_required` and takes the answers with its
//! `requestState`.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetTaskParams, TaskPayload, TaskStatus,
    UpdateTaskParams,
};
use serde_json::{Value, json};
use taskstore::auth::AuthMethod;
use taskstore::domain::Role;

use crate::common;
use crate::extension::rmcp_client;
use crate::harness::{Caller, Events, Gateway, until_status};

pub fn response_to(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

#[tokio::test]
async fn a_question_streams_on_tasks_result_and_its_answer_reaches_another_replica() {
    let pool = common::migrated_pool().await;
    let first = Gateway::on(pool.clone(), AuthMethod::ApiKeys, 0).await;
    let second = Gateway::on(pool, AuthMethod::ApiKeys, 0).await;
    let (acme, globex) = (
        first.key("acme", Role::Client).await,
        first.key("globex", Role::Client).await,
    );
    let owner = Caller::new(&first, Some(&acme)).initialize().await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 10, "ask": "Proceed?"}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&owner, &id, "input_required").await;

    let mut events = Events::open(
        &owner,
        json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": id}}),
    )
    .await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Proceed?");
    assert_eq!(
        asked["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let request_id = asked["id"].clone();
    assert!(request_id.as_str().is_some_and(|s| s.starts_with("tsq.")));

    // What must change nothing: the answer from another session, another
    // tenant, with a tampered id, or to no request of ours.
    let accept = json!({"action": "accept", "content": {}});
    let other_session = Caller::new(&second, Some(&acme)).initialize().await;
    let mut other_tenant = Caller::new(&second, Some(&globex)).initialize().await;
    other_tenant.session = owner.session.clone();
    let tampered = json!(format!("{}x", request_id.as_str().unwrap_or_default()));
    for (stranger, id) in [
        (&other_session, &request_id),
        (&other_tenant, &request_id),
        (&owner.at(&second), &tampered),
        (&owner.at(&second), &json!(7)),
    ] {
        let posted = stranger.post(&response_to(id, accept.clone()), &[]).await;
        assert_eq!(posted.status, 202, "{:?}", posted.body);
    }
    let still = owner.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["status"], "input_required", "{still}");
    // The owner's answer with content the question did not ask for is
    // refused (the field named), and the question stays open.
    let unasked = json!({"action": "accept", "content": {"extra": [1, 2, 3]}});
    let posted = owner.post(&response_to(&request_id, unasked), &[]).await;
    assert_eq!(posted.status, 400, "{:?}", posted.body);
    assert_eq!(posted.body["error"]["code"], -32602, "{:?}", posted.body);
    let said = posted.body["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains("content.extra"), "{said}");
    let still = owner.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["status"], "input_required", "{still}");

    // The owner's answer, POSTed to the other replica, reaches the tool.
    let posted = owner
        .at(&second)
        .post(&response_to(&request_id, accept.clone()), &[])
        .await;
    assert_eq!(posted.status, 202);
    // Once streaming, the task's status changes come along before the
    // response.
    let mut statuses = Vec::new();
    let answered = loop {
        let event = events.next().await;
        if event["method"] == "notifications/tasks/status" {
            assert_eq!(event["params"]["taskId"], id.as_str(), "{event}");
            statuses.push(event["params"]["status"].as_str().unwrap_or("").to_owned());
        } else {
            break event;
        }
    };
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("completed"),
        "{statuses:?}"
    );
    assert!(statuses.iter().any(|s| s == "working"), "{statuses:?}");
    assert_eq!(answered["id"], 9, "{answered}");
    assert_eq!(answered["result"]["content"][0]["text"], "slept 10 ms");
    // Replayed after the task ended: nothing happens.
    let replayed = owner.post(&response_to(&request_id, accept), &[]).await;
    assert_eq!(replayed.status, 202);
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn the_extension_inlines_questions_and_takes_partial_answers() {
    let gateway = Gateway::open().await;
    let client = rmcp_client(&gateway.url(), true).await;
    let arguments = json!({}).as_object().cloned().expect("object");
    let response = client
        .call_tool_once(CallToolRequestParams::new("ask_twice").with_arguments(arguments))
        .await
        .expect("tools/call");
    let CallToolResponse::Task(created) = response else {
        panic!("a task expected, got {response:?}");
    };
    let id = created.task.task_id.clone();
    let questions = loop {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect("tasks/get");
        match got.task.payload {
            TaskPayload::InputRequired { input_requests } if input_requests.len() == 2 => {
                break input_requests;
            }
            _ => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    };
    assert!(questions.contains_key("first") && questions.contains_key("second"));
    let answer = |v: &str| json!({"action": "accept", "content": {"v": v}});
    // An answer that does not match the question's schema: -32602, naming
    // the field; nothing is taken.
    let refused = client
        .peer()
        .update_task(UpdateTaskParams::new(
            id.clone(),
            [(
                "first".to_owned(),
                json!({"action": "accept", "content": {"v": 7}}),
            )]
            .into(),
        ))
        .await
        .expect_err("refused");
    assert!(refused.to_string().contains("content.v"), "{refused}");
    client
        .peer()
        .update_task(UpdateTaskParams::new(
            id.clone(),
            [
                ("first".to_owned(), answer("one")),
                ("unknown".to_owned(), answer("x")),
            ]
            .into(),
        ))
        .await
        .expect("a partial answer is acknowledged");
    let got = client
        .peer()
        .get_task(GetTaskParams::new(id.clone()))
        .await
        .expect("tasks/get");
    let TaskPayload::InputRequired { input_requests } = got.task.payload else {
        panic!(
            "still waiting for the second answer: {:?}",
            got.task.payload
        );
    };
    assert_eq!(input_requests.keys().collect::<Vec<_>>(), ["second"]);
    client
        .peer()
        .update_task(UpdateTaskParams::new(
            id.clone(),
            [("second".to_owned(), answer("two"))].into(),
        ))
        .await
        .expect("the rest");
    let result = loop {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(id.clone()))
            .await
            .expect("tasks/get");
        if let TaskPayload::Completed { result } = got.task.payload {
            break result;
        }
        assert_ne!(got.task.status(), TaskStatus::Failed, "{:?}", got.task);
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(result["content"][0]["text"], "one two");
    client.cancel().await.expect("closes");
    gateway.stop().await;
}

/// A tool that is never a task asks: the call answers `input_required`
/// with a sealed state, and its retry with the answer gets the result.
#[tokio::test]
async fn a_synchronous_call_that_needs_input_takes_its_answers_on_retry() {
    let gateway = Gateway::open().await;
    let client = rmcp_client(&gateway.url(), true).await;
    let response = client
        .call_tool_once(CallToolRequestParams::new("ask_direct"))
        .await
        .expect("tools/call");
    let CallToolResponse::InputRequired(needed) = response else {
        panic!("input_required expected, got {response:?}");
    };
    let requests = needed.input_requests.clone().expect("its requests");
    assert!(requests.contains_key("ok"), "{requests:?}");
    let state = needed.request_state.clone().expect("a request state");
    // A forged state is refused, and changes nothing.
    let forged = client
        .call_tool_once(
            CallToolRequestParams::new("ask_direct")
                .with_input_responses([("ok".to_owned(), json!({"action": "accept"}))].into())
                .with_request_state(format!("{state}x")),
        )
        .await;
    assert!(forged.is_err(), "{forged:?}");
    let retried = client
        .call_tool_once(
            CallToolRequestParams::new("ask_direct")
                .with_input_responses(
                    [("ok".to_owned(), json!({"action": "accept", "content": {}}))].into(),
                )
                .with_request_state(state),
        )
        .await
        .expect("the retry");
    let CallToolResponse::Complete(result) = retried else {
        panic!("the result expected, got {retried:?}");
    };
    assert_eq!(
        serde_json::to_value(&result).expect("json")["content"][0]["text"],
        "answered accept"
    );
    client.cancel().await.expect("closes");
    gateway.stop().await;
}
