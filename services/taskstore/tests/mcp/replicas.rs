//! Gateways hold nothing a request to another replica needs: a task made
//! through one is read and cancelled through another, and a gateway that
//! stops and comes back still answers for its tasks.

use serde_json::json;
use taskstore::auth::AuthMethod;

use crate::common;
use crate::harness::{Caller, Gateway, until_status};

#[tokio::test]
async fn any_replica_answers_for_any_task() {
    let pool = common::migrated_pool().await;
    let first = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let second = Gateway::on(pool.clone(), AuthMethod::None, 0).await;
    let at_first = Caller::new(&first, None).initialize().await;
    // The session issued by the first replica, at the second: no stickiness.
    let at_second = at_first.at(&second);

    let created = at_first
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    let seen = until_status(&at_second, &id, "working").await;
    assert_eq!(seen["taskId"], id.as_str());
    let cancelled = at_second.ok("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancelled["status"], "cancelled");
    until_status(&at_first, &id, "cancelled").await;

    // A result waited for on one replica, of a task made on the other.
    let quick = at_second
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 200}, "task": {}}),
        )
        .await;
    let quick_id = quick["task"]["taskId"].as_str().expect("id").to_owned();
    let result = at_first
        .ok("tasks/result", json!({"taskId": quick_id}))
        .await;
    assert_eq!(result["content"][0]["text"], "slept 200 ms");

    // The first replica stops; one on its port comes back and answers for
    // what the session made before.
    let port = first.mcp.port();
    first.stop().await;
    let back = Gateway::on(pool, AuthMethod::None, port).await;
    assert_eq!(back.mcp.port(), port);
    let again = at_first.ok("tasks/get", json!({"taskId": quick_id})).await;
    assert_eq!(again["status"], "completed");
    let listed = at_first.ok("tasks/list", json!({})).await;
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(2),
        "{listed}"
    );
    back.stop().await;
    second.stop().await;
}
