//! Changes pushed to clients: 2025-11-25 status and progress notifications
//! on the session's GET stream, whichever replica made the change, event
//! ids that resume a stream (the session's, or a waiting request's) on
//! another replica; 2026-07-28 `subscriptions/listen`; the handshake of
//! rmcp's plain `serve()`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use rmcp::ServiceExt;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, GetTaskParams,
    Implementation, ProtocolVersion, TASKS_EXTENSION_ID, TaskPayload, TaskStatus,
};
use rmcp::transport::StreamableHttpClientTransport;
use serde_json::{Value, json};
use taskstore::auth::AuthMethod;

use crate::common;
use crate::harness::{Caller, Events, Gateway, until_status};
use crate::questions::response_to;

/// How late a notification may arrive after the change it tells of.
const WITHIN: Duration = Duration::from_secs(1);

fn lateness(task: &Value) -> Duration {
    let at: DateTime<Utc> = task["lastUpdatedAt"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .expect("lastUpdatedAt");
    (Utc::now() - at).to_std().unwrap_or_default()
}

#[tokio::test]
async fn status_and_progress_reach_a_session_stream_on_another_replica() {
    let pool = common::migrated_pool().await;
    let first = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let second = Gateway::on(pool, AuthMethod::None, 0).await;
    let owner = Caller::new(&first, None).initialize().await;
    let stranger = Caller::new(&first, None).initialize().await;
    let mut stream = Events::get(&owner.at(&second), None).await;
    let priming = stream.next_event().await.expect("a first event");
    assert!(
        priming.data.is_none() && priming.id.is_some(),
        "{priming:?}"
    );

    // Another session's task changes too: none of it may reach us.
    stranger
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 1200}, "task": {}}),
        )
        .await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 2500}, "task": {},
                   "_meta": {"progressToken": "tok-1"}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();

    let (mut statuses, mut progress) = (Vec::new(), Vec::new());
    loop {
        let message = stream.next().await;
        let params = &message["params"];
        match message["method"].as_str() {
            Some("notifications/tasks/status") => {
                assert_eq!(
                    params["taskId"],
                    id.as_str(),
                    "only our session's: {message}"
                );
                assert!(lateness(params) < WITHIN, "late: {message}");
                statuses.push(params["status"].as_str().unwrap_or("").to_owned());
                if params["status"] == "completed" {
                    break;
                }
            }
            Some("notifications/progress") => {
                assert_eq!(params["progressToken"], "tok-1", "{message}");
                progress.push((
                    params["progress"].as_u64().expect("a number"),
                    params["message"].as_str().unwrap_or("").to_owned(),
                ));
            }
            _ => panic!("unexpected {message}"),
        }
    }
    assert!(
        statuses.iter().filter(|s| *s == "working").count() >= 3,
        "{statuses:?}"
    );
    let messages: Vec<&str> = progress.iter().map(|(_, m)| m.as_str()).collect();
    assert!(messages.contains(&"slept 1000 of 2500 ms"), "{messages:?}");
    assert!(messages.contains(&"slept 2000 of 2500 ms"), "{messages:?}");
    assert!(
        progress.windows(2).all(|pair| pair[0].0 < pair[1].0),
        "progress grows: {progress:?}"
    );

    // A cancel through the first replica reaches the stream on the second.
    let long = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let long_id = long["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&owner, &long_id, "working").await;
    owner.ok("tasks/cancel", json!({"taskId": long_id})).await;
    loop {
        let message = stream.next().await;
        if message["params"]["status"] == "cancelled" {
            assert_eq!(message["params"]["taskId"], long_id.as_str());
            assert!(lateness(&message["params"]) < WITHIN, "late: {message}");
            break;
        }
    }
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn a_session_stream_resumes_on_another_replica_with_what_it_missed() {
    let pool = common::migrated_pool().await;
    let first = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let second = Gateway::on(pool, AuthMethod::None, 0).await;
    let owner = Caller::new(&first, None).initialize().await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&owner, &id, "working").await;

    let mut stream = Events::get(&owner, None).await;
    stream.next_event().await.expect("the priming event");
    let seen_at = stream.last_id.clone().expect("an event id");
    drop(stream);
    // Changed while nobody listened.
    owner.ok("tasks/cancel", json!({"taskId": id})).await;

    let mut resumed = Events::get(&owner.at(&second), Some(&seen_at)).await;
    let missed = resumed.next().await;
    assert_eq!(missed["method"], "notifications/tasks/status", "{missed}");
    assert_eq!(missed["params"]["taskId"], id.as_str());
    assert_eq!(missed["params"]["status"], "cancelled");

    // Ids are sealed to the session: altered, or another session's, they
    // resume nothing.
    let other = Caller::new(&second, None).initialize().await;
    let tampered = format!("{seen_at}x");
    for (caller, last) in [(&owner, tampered.as_str()), (&other, seen_at.as_str())] {
        let refused = Events::get_response(&caller.at(&second), Some(last)).await;
        assert_eq!(refused.status(), 400);
        let body: Value = refused.json().await.expect("a JSON-RPC error");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("Last-Event-ID")),
            "{body}"
        );
    }
    // Without a session there is no session stream.
    let anonymous = Caller::new(&second, None);
    assert_eq!(Events::get_response(&anonymous, None).await.status(), 400);
    first.stop().await;
    second.stop().await;
}

#[tokio::test]
async fn a_waiting_result_stream_is_handed_over_when_its_replica_stops() {
    let pool = common::migrated_pool().await;
    // The task runs on the second replica's worker; the first only serves
    // the stream that is handed over.
    let second = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let first = Gateway::api_only(pool).await;
    let owner = Caller::new(&first, None).initialize().await;
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
        json!({"jsonrpc": "2.0", "id": 41, "method": "tasks/result", "params": {"taskId": id}}),
    )
    .await;
    let asked = events.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");

    // The replica stops: the stream ends with its position and a retry
    // delay, not with an error.
    let stopping = tokio::spawn(first.stop());
    while events.next_event().await.is_some() {}
    stopping.await.expect("stopped");
    assert!(events.retry.is_some(), "told when to come back");
    let last = events.last_id.clone().expect("an event id");

    // Resumed on the other replica: the question is not asked again; the
    // answer (POSTed anywhere) leads to the response, with the original id.
    let at_second = owner.at(&second);
    let mut resumed = Events::get(&at_second, Some(&last)).await;
    let accept = json!({"action": "accept", "content": {}});
    let posted = at_second
        .post(&response_to(&asked["id"], accept), &[])
        .await;
    assert_eq!(posted.status, 202);
    let answered = loop {
        let message = resumed.next().await;
        assert_ne!(
            message["method"], "elicitation/create",
            "asked twice: {message}"
        );
        if message.get("id").is_some() {
            break message;
        }
    };
    assert_eq!(answered["id"], 41, "{answered}");
    assert_eq!(answered["result"]["content"][0]["text"], "slept 10 ms");
    second.stop().await;
}

/// The 2026-07-28 headers and `_meta` of a raw request, in `tenant`.
fn extension_caller(gateway: &Gateway, tenant: &str) -> Caller {
    let mut caller = Caller::new(gateway, None);
    caller.extra_headers = vec![
        ("mcp-protocol-version".into(), "2026-07-28".into()),
        ("x-taskstore-tenant".into(), tenant.into()),
    ];
    caller
}

fn extension_params(mut params: Value) -> Value {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION_ID: {}}},
    });
    params
}

#[tokio::test]
async fn a_listen_subscription_acknowledges_own_tasks_and_inlines_the_result() {
    let pool = common::migrated_pool().await;
    let first = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let second = Gateway::on(pool, AuthMethod::None, 0).await;
    let acme = extension_caller(&first, "acme");
    let globex = extension_caller(&first, "globex");
    let call = |caller: &Caller, ms: u64| {
        let caller = caller.clone();
        async move {
            let handle = caller
                .ok(
                    "tools/call",
                    extension_params(json!({"name": "sleep", "arguments": {"ms": ms}})),
                )
                .await;
            assert_eq!(handle["resultType"], "task", "{handle}");
            handle["taskId"].as_str().expect("id").to_owned()
        }
    };
    let ours = call(&acme, 1500).await;
    let theirs = call(&globex, 1500).await;

    let listen = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen",
        "params": extension_params(json!({"notifications": {"taskIds": [ours, theirs, "never-was"]}}))});
    let mut events = Events::open(&extension_caller(&second, "acme"), listen).await;
    let ack = events.next().await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([ours]));
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    let done = loop {
        let message = events.next().await;
        assert_eq!(message["method"], "notifications/tasks", "{message}");
        assert_eq!(
            message["params"]["taskId"],
            ours.as_str(),
            "only ours: {message}"
        );
        assert_eq!(
            message["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "sub-1"
        );
        if message["params"]["status"] == "completed" {
            break message;
        }
    };
    assert_eq!(
        done["params"]["result"]["content"][0]["text"], "slept 1500 ms",
        "the result inlined: {done}"
    );

    // Without the tasks extension, naming tasks is refused (-32021).
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "subscriptions/listen",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"},
                   "notifications": {"taskIds": [ours]}}});
    let refused = acme.post(&bare.to_string(), &[]).await;
    assert_eq!(refused.body["error"]["code"], -32021, "{:?}", refused.body);
    // The gateway stopping ends the subscription with its result.
    second.stop().await;
    let last = loop {
        let message = events.next().await;
        if message.get("id").is_some() {
            break message;
        }
    };
    assert_eq!(last["id"], "sub-1");
    assert_eq!(last["result"]["resultType"], "complete");
    first.stop().await;
}

#[tokio::test]
async fn rmcp_plain_serve_gets_tasks() {
    let gateway = Gateway::open().await;
    let mut capabilities = ClientCapabilities::default();
    capabilities.extensions = Some(
        [(TASKS_EXTENSION_ID.to_owned(), Default::default())]
            .into_iter()
            .collect(),
    );
    let info = ClientConfig::new(capabilities, Implementation::new("plain-serve", "1.0"));
    let client = info
        .serve(StreamableHttpClientTransport::from_uri(gateway.url()))
        .await
        .expect("the plain handshake");
    let peer = client.peer().peer_info().expect("handshake done");
    assert_eq!(peer.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(peer.capabilities.supports_tasks());

    let arguments = json!({"ms": 300}).as_object().cloned().expect("object");
    let response = client
        .call_tool_once(CallToolRequestParams::new("sleep").with_arguments(arguments))
        .await
        .expect("tools/call");
    let CallToolResponse::Task(created) = response else {
        panic!("a task, not {response:?}");
    };
    let task_id = created.task.task_id.clone();
    let mut finished = None;
    for _ in 0..200 {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(task_id.as_str()))
            .await
            .expect("tasks/get");
        if got.task.status() == TaskStatus::Completed {
            finished = Some(got.task.payload);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Some(TaskPayload::Completed { result }) = finished else {
        panic!("never completed: {finished:?}");
    };
    let text = serde_json::to_value(&result).expect("json");
    assert_eq!(text["content"][0]["text"], "slept 300 ms", "{text}");
    client.cancel().await.expect("closes");
    gateway.stop().await;
}

/// Each change of a task reaches a 2025-11-25 session once: while a
/// `tasks/result` stream carries the task, the session's GET stream leaves
/// its changes out (issue 38).
#[tokio::test]
async fn a_change_reaches_a_session_once_with_a_result_stream_open() {
    let gateway = Gateway::open().await;
    let owner = Caller::new(&gateway, None).initialize().await;
    let mut session_stream = Events::get(&owner, None).await;
    let priming = session_stream.next_event().await.expect("a first event");
    assert!(priming.data.is_none(), "{priming:?}");
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 10, "ask": "Proceed?"}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&owner, &id, "input_required").await;
    let mut result_stream = Events::open(
        &owner,
        json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/result", "params": {"taskId": id}}),
    )
    .await;
    let asked = result_stream.next().await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    let posted = owner
        .post(
            &response_to(&asked["id"], json!({"action": "accept", "content": {}})),
            &[],
        )
        .await;
    assert_eq!(posted.status, 202);
    let mut on_result_stream = Vec::new();
    loop {
        let event = result_stream.next().await;
        if event["method"] == "notifications/tasks/status" {
            on_result_stream.push(change_of(&event["params"]));
        } else {
            assert_eq!(event["id"], 5, "{event}");
            break;
        }
    }
    assert!(
        on_result_stream
            .iter()
            .any(|(status, _)| status == "completed"),
        "{on_result_stream:?}"
    );
    // What the GET stream carried meanwhile, and a moment after.
    let mut on_session_stream = Vec::new();
    while let Ok(Some(event)) =
        tokio::time::timeout(Duration::from_secs(3), session_stream.next_event()).await
    {
        if let Some(data) = event.data
            && data["method"] == "notifications/tasks/status"
            && data["params"]["taskId"] == id.as_str()
        {
            on_session_stream.push(change_of(&data["params"]));
        }
    }
    for change in &on_result_stream {
        assert!(
            !on_session_stream.contains(change),
            "{change:?} reached the session twice: {on_session_stream:?} and {on_result_stream:?}"
        );
    }
    gateway.stop().await;
}

/// A change, as its notification tells it: the status and when.
fn change_of(params: &Value) -> (String, String) {
    (
        params["status"].as_str().unwrap_or_default().to_owned(),
        params["lastUpdatedAt"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}
