//! Idempotent `tools/call`: the key in `_meta["mcp-taskstore/idempotency-key"]`
//! makes a retried call (after a lost response) return the first call's
//! task, in both revisions; a bad key is refused before anything is made.

use serde_json::{Value, json};

use crate::extension::raw_caller;
use crate::harness::{Caller, Gateway};

const KEY: &str = "mcp-taskstore/idempotency-key";

fn call(text: &str, key: Value, task: bool) -> Value {
    let mut params = json!({"name": "echo", "arguments": {"text": text}, "_meta": {KEY: key}});
    if task {
        params["task"] = json!({"ttl": 60000});
    }
    params
}

#[tokio::test]
async fn a_retried_call_with_a_key_returns_the_first_calls_task_in_both_revisions() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;

    // 2025-11-25: the task object twice, one task.
    let first = caller
        .ok("tools/call", call("hi", json!("k-1"), true))
        .await;
    let again = caller
        .ok("tools/call", call("hi", json!("k-1"), true))
        .await;
    assert_eq!(first["task"]["taskId"], again["task"]["taskId"], "{again}");
    let listed = caller.ok("tasks/list", json!({})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // The key with other arguments is refused, and makes nothing.
    let refused = caller
        .rpc("tools/call", call("ho", json!("k-1"), true))
        .await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("idempotency key")),
        "{refused}"
    );
    // A key that is not a string, or is empty, is refused, not ignored.
    for bad in [json!(7), json!(""), json!("x".repeat(256))] {
        let refused = caller
            .rpc("tools/call", call("hi", bad.clone(), true))
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{bad}: {refused}");
    }
    let listed = caller.ok("tasks/list", json!({})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );

    // 2026-07-28, with the tasks extension: the task handle twice.
    let raw = raw_caller(&gateway);
    let first = raw.ok("tools/call", call("hi", json!("k-2"), false)).await;
    let again = raw.ok("tools/call", call("hi", json!("k-2"), false)).await;
    assert_eq!(first["resultType"], "task", "{first}");
    assert_eq!(first["taskId"], again["taskId"], "{again}");
    // Without the extension the call waits for its result; a retry waits
    // for the same task's.
    let plain = raw_caller(&gateway).without_extension();
    let result = plain
        .ok("tools/call", call("sync", json!("k-3"), false))
        .await;
    let retried = plain
        .ok("tools/call", call("sync", json!("k-3"), false))
        .await;
    assert_eq!(result["content"][0]["text"], "sync");
    assert_eq!(retried, result);
    gateway.stop().await;
}
