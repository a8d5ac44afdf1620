//! The 2025-11-25 revision: tasks in the core protocol.

use serde_json::json;

use crate::harness::{Caller, Gateway, until_status};

/// Tools are listed with their schemas and task support; a call runs as a
/// task when asked (answered at once) or synchronously; `tasks/result`
/// waits for the end; cancelling works once and only before the end.
#[tokio::test]
async fn tools_run_as_tasks_or_synchronously() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;

    let tools = caller.ok("tools/list", json!({})).await;
    let tool = |name: &str| {
        tools["tools"]
            .as_array()
            .and_then(|tools| tools.iter().find(|t| t["name"] == name).cloned())
            .unwrap_or_else(|| panic!("{name} listed: {tools}"))
    };
    assert_eq!(tool("echo")["execution"]["taskSupport"], "optional");
    assert_eq!(
        tool("echo")["inputSchema"]["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(tool("only_task")["execution"]["taskSupport"], "required");
    assert_eq!(
        tool("only_task")["inputSchema"]["properties"]["x"]["type"],
        "integer"
    );
    assert_eq!(tool("never_task")["execution"]["taskSupport"], "forbidden");
    assert_eq!(tool("never_task")["title"], "Never a task");

    // Synchronously: the result itself.
    let echoed = caller
        .ok(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )
        .await;
    assert_eq!(echoed["content"][0]["text"], "hi");
    assert_eq!(echoed["isError"], false);

    // As a task: the task at once, with the ttl asked for.
    let created = caller
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 300}, "task": {"ttl": 60000}}),
        )
        .await;
    let task = &created["task"];
    let id = task["taskId"].as_str().expect("task id").to_owned();
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 60000);
    assert!(task["pollInterval"].as_u64().is_some());
    assert!(task["createdAt"].as_str().is_some_and(|t| t.ends_with('Z')));

    let result = caller.ok("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["content"][0]["text"], "slept 300 ms");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        id.as_str()
    );
    let done = caller.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(done["status"], "completed");
    let listed = caller.ok("tasks/list", json!({})).await;
    assert!(
        listed["tasks"]
            .as_array()
            .is_some_and(|tasks| tasks.iter().any(|t| t["taskId"] == id.as_str())),
        "{listed}"
    );
    // A finished task cannot be cancelled: -32602, and it stays completed.
    assert_eq!(
        caller
            .error_code("tasks/cancel", json!({"taskId": id}))
            .await,
        -32602
    );
    assert_eq!(
        until_status(&caller, &id, "completed").await["taskId"],
        id.as_str()
    );

    // A long one, cancelled while it runs.
    let long = caller
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let long_id = long["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&caller, &long_id, "working").await;
    let cancelled = caller.ok("tasks/cancel", json!({"taskId": long_id})).await;
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(
        caller
            .error_code("tasks/cancel", json!({"taskId": long_id}))
            .await,
        -32602,
        "cancelling twice is cancelling a finished task"
    );
    let no_result = caller.rpc("tasks/result", json!({"taskId": long_id})).await;
    assert_eq!(no_result["error"]["code"], -32603, "{no_result}");
    assert_eq!(no_result["error"]["message"], "the task was cancelled");

    // Task support is enforced (-32601, as the spec says).
    assert_eq!(
        caller
            .error_code("tools/call", json!({"name": "only_task", "arguments": {}}))
            .await,
        -32601
    );
    assert_eq!(
        caller
            .error_code(
                "tools/call",
                json!({"name": "never_task", "arguments": {}, "task": {}})
            )
            .await,
        -32601
    );
    let said = caller
        .ok(
            "tools/call",
            json!({"name": "never_task", "arguments": {"x": 1}}),
        )
        .await;
    assert_eq!(said["content"][0]["text"], r#"{"x":1}"#);
    let only = caller
        .ok(
            "tools/call",
            json!({"name": "only_task", "arguments": {"x": 2}, "task": {}}),
        )
        .await;
    assert_eq!(only["task"]["status"], "working");

    // Unknown tools and bad arguments are invalid params.
    for params in [
        json!({"name": "nobody_serves_this"}),
        json!({"name": "bad name!"}),
        json!({"name": "echo", "arguments": [1]}),
        json!({"name": "echo", "task": 5}),
        json!({"name": "echo", "task": {"ttl": -1}}),
        json!({}),
    ] {
        assert_eq!(
            caller.error_code("tools/call", params.clone()).await,
            -32602,
            "{params}"
        );
    }
    gateway.stop().await;
}

/// A tool result with `isError: true` is a failed task in 2025-11-25, and
/// a completed one (with the result inlined) in 2026-07-28: one stored
/// truth, two names.
#[tokio::test]
async fn an_error_result_is_failed_here_and_completed_in_the_extension() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    let created = caller
        .ok(
            "tools/call",
            json!({"name": "broken", "arguments": {}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    let failed = until_status(&caller, &id, "failed").await;
    assert_eq!(failed["taskId"], id.as_str());
    // The failure says why where `tasks/get` shows it.
    assert_eq!(
        failed["statusMessage"], "sh exited with exit status: 3",
        "{failed}"
    );
    let result = caller.ok("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["isError"], true);
    // The reason first, then what the tool printed.
    assert_eq!(
        (&result["content"][0]["text"], &result["content"][1]["text"]),
        (&json!("sh exited with exit status: 3"), &json!("broken")),
        "{result}"
    );

    // The same task through the extension (tenant-wide: no sessions there).
    let extension = crate::extension::raw_caller(&gateway);
    let seen = extension.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(seen["status"], "completed", "{seen}");
    assert_eq!(seen["result"]["isError"], true);
    assert_eq!(seen["resultType"], "complete");
    gateway.stop().await;
}

/// A synchronous call runs through a task nobody else knows of: when its
/// client cancels the request, or goes away, the task is cancelled.
#[tokio::test]
async fn an_abandoned_synchronous_call_cancels_its_task() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call",
                      "params": {"name": "sleep", "arguments": {"ms": 60000}}});
    let running = {
        let caller = caller.clone();
        let call = call.to_string();
        tokio::spawn(async move { caller.post(&call, &[]).await })
    };
    let id = running_task(&caller).await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": "slow-1", "reason": "user"}});
    assert_eq!(caller.post(&note.to_string(), &[]).await.status, 202);
    until_status(&caller, &id, "cancelled").await;
    let answer = running.await.expect("the call ends");
    assert_eq!(answer.body["error"]["message"], "the task was cancelled");

    // The client goes away (its request is dropped mid-wait).
    let other = Caller::new(&gateway, None).initialize().await;
    let dropped = {
        let other = other.clone();
        let call = call.to_string();
        tokio::spawn(async move { other.post(&call, &[]).await })
    };
    let id = running_task(&other).await;
    dropped.abort();
    until_status(&other, &id, "cancelled").await;
    gateway.stop().await;
}

/// The one task of the caller's session, once a worker runs it.
async fn running_task(caller: &Caller) -> String {
    for _ in 0..200 {
        let listed = caller.ok("tasks/list", json!({})).await;
        if let Some(task) = listed["tasks"].as_array().and_then(|tasks| tasks.first())
            && task["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("running"))
        {
            return task["taskId"].as_str().expect("id").to_owned();
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the synchronous call's task never ran");
}

/// Arguments a tool's `inputSchema` refuses are refused with -32602 before
/// a task exists (issue 38).
#[tokio::test]
async fn arguments_the_tools_schema_refuses_never_become_a_task() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    for call in [
        json!({"name": "sleep", "arguments": {"ms": "soon"}}),
        json!({"name": "sleep", "arguments": {"ms": "soon"}, "task": {}}),
    ] {
        let response = caller.rpc("tools/call", call.clone()).await;
        assert_eq!(response["error"]["code"], -32602, "{call}: {response}");
        let said = response["error"]["message"].as_str().unwrap_or_default();
        assert!(said.contains("arguments.ms"), "{said}");
    }
    let listed = caller.ok("tasks/list", json!({})).await;
    assert_eq!(listed["tasks"], json!([]), "{listed}");
    gateway.stop().await;
}
