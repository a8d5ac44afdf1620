//! Start times through `_meta` on `tools/call`: the task waits, saying
//! when it starts, and runs then; a start that does not read is refused.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{Caller, Gateway};

#[tokio::test]
async fn a_call_names_its_start_in_meta_and_runs_no_sooner() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    let asked = Instant::now();
    let created = caller
        .ok(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "later"}, "task": {"ttl": 60000},
                   "_meta": {"mcp-taskstore/start-after-ms": 1500}}),
        )
        .await;
    let task = &created["task"];
    assert!(
        task["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("starts at ")),
        "{created}"
    );
    let id = task["taskId"].as_str().expect("id");
    let result = caller.ok("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["content"][0]["text"], "later");
    assert!(asked.elapsed() >= Duration::from_millis(1500), "ran early");

    for meta in [
        json!({"mcp-taskstore/start-at": "next tuesday"}),
        json!({"mcp-taskstore/start-after-ms": -5}),
        json!({"mcp-taskstore/start-at": "2000-01-01T00:00:00Z"}),
    ] {
        let refused = caller
            .rpc(
                "tools/call",
                json!({"name": "echo", "arguments": {}, "task": {}, "_meta": meta}),
            )
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{meta}: {refused}");
    }
    let listed = caller.ok("tasks/list", json!({})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    gateway.stop().await;
}
