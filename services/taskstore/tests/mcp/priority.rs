//! Priorities through `_meta` on `tools/call`: one in range is taken (and
//! the call runs as any other); one that does not read is refused before a
//! task exists. Their effect on the order is the conformance suite's
//! (`dispatch_order`).

use serde_json::json;

use crate::harness::{Caller, Gateway};

#[tokio::test]
async fn a_call_names_its_priority_in_meta() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    let created = caller
        .ok(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "first"}, "task": {"ttl": 60000},
                   "_meta": {"mcp-taskstore/priority": 9}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id");
    let result = caller.ok("tasks/result", json!({"taskId": id})).await;
    assert_eq!(result["content"][0]["text"], "first");

    for priority in [json!(10), json!(-1), json!("high"), json!(1.5)] {
        let refused = caller
            .rpc(
                "tools/call",
                json!({"name": "echo", "arguments": {}, "task": {},
                       "_meta": {"mcp-taskstore/priority": priority}}),
            )
            .await;
        assert_eq!(refused["error"]["code"], -32602, "{priority}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("mcp-taskstore/priority")),
            "{refused}"
        );
    }
    let listed = caller.ok("tasks/list", json!({})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
    gateway.stop().await;
}
