//! Hostile input: the spec's errors, no panic, nothing changed.

use serde_json::json;
use taskstore::auth::AuthMethod;
use taskstore::domain::Role;

use crate::common;
use crate::extension::raw_caller;
use crate::harness::{Caller, Gateway, until_status};

#[tokio::test]
async fn malformed_and_oversize_requests_are_refused() {
    let gateway = Gateway::open().await;
    let caller = Caller::new(&gateway, None).initialize().await;
    for (body, status, code) in [
        ("{", 400, -32700),
        ("[]", 400, -32600),
        (r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#, 400, -32600),
        (r#"{"jsonrpc":"2.0","id":1}"#, 400, -32600),
        (r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#, 400, -32600),
        (r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#, 400, -32600),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping","params":7}"#,
            400,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"no/such/method"}"#,
            200,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":7}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"../../etc"}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{"cursor":"forged"}}"#,
            200,
            -32602,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{}}"#,
            200,
            -32601,
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#,
            200,
            -32601,
        ),
    ] {
        let answer = caller.post(body, &[]).await;
        assert_eq!(answer.status, status, "{body}: {:?}", answer.body);
        assert_eq!(
            answer.body["error"]["code"], code,
            "{body}: {:?}",
            answer.body
        );
    }
    // Larger than the body limit (the gRPC message limit, 4 MiB).
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{}"}}}}}}"#,
        "x".repeat(5 * 1024 * 1024)
    );
    assert_eq!(caller.post(&huge, &[]).await.status, 413);
    // Within it but over the 1 MiB JSON limit of a stored request.
    let big = huge.replace(&"x".repeat(5 * 1024 * 1024), &"x".repeat(2 * 1024 * 1024));
    let answer = caller.post(&big, &[]).await;
    assert_eq!(answer.body["error"]["code"], -32602, "{:?}", answer.body);

    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let refused = caller.post(ping, &[("content-type", "text/plain")]).await;
    assert_eq!(refused.status, 415);
    let refused = caller
        .post(ping, &[("origin", "https://evil.example")])
        .await;
    assert_eq!(refused.status, 403);
    let allowed = caller
        .post(ping, &[("origin", "http://localhost:6274")])
        .await;
    assert_eq!(allowed.status, 200);
    let mut forged = caller.clone();
    forged.session = Some("s".repeat(300));
    assert_eq!(forged.post(ping, &[]).await.status, 400);
    let mut sessionless = caller.clone();
    sessionless.session = None;
    assert_eq!(
        sessionless.error_code("tasks/list", json!({})).await,
        -32600
    );
    let unknown_version = caller
        .post(ping, &[("mcp-protocol-version", "1999-01-01")])
        .await;
    assert_eq!(unknown_version.status, 400);

    // 2026-07-28 framing errors.
    let raw = raw_caller(&gateway);
    assert_eq!(
        raw.error_code("tasks/result", json!({"taskId": "x"})).await,
        -32601
    );
    assert_eq!(raw.error_code("tasks/list", json!({})).await, -32601);
    assert_eq!(raw.error_code("initialize", json!({})).await, -32601);
    let mismatch = caller
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
            .to_string(),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
            ],
        )
        .await;
    assert_eq!(
        (mismatch.status, mismatch.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    // Mcp-Name naming another tool than the body's: refused before any method runs.
    let renamed = caller
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "sleep", "arguments": {"ms": 60000},
                "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})
            .to_string(),
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "tools/call"),
                ("mcp-name", "echo"),
            ],
        )
        .await;
    assert_eq!(
        (renamed.status, renamed.body["error"]["code"].clone()),
        (400, json!(-32020))
    );
    let future = caller
        .post(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2099-01-01"}}})
            .to_string(),
            &[],
        )
        .await;
    assert_eq!(future.body["error"]["code"], -32022);
    assert_eq!(
        future.body["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );

    // A GET stream needs an event-stream Accept and a session; in
    // 2026-07-28 there is none. The gateway still answers.
    let http = reqwest::Client::new();
    let get = http
        .get(gateway.url())
        .header("accept", "application/json")
        .send()
        .await
        .expect("answers");
    assert_eq!(get.status().as_u16(), 406);
    let without_session = http
        .get(gateway.url())
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("answers");
    assert_eq!(without_session.status().as_u16(), 400);
    let modern = http
        .get(gateway.url())
        .header("accept", "text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .send()
        .await
        .expect("answers");
    assert_eq!(modern.status().as_u16(), 405);
    assert_eq!(caller.ok("ping", json!({})).await, json!({}));
    gateway.stop().await;
}

/// Another session's task, or another tenant's, does not exist for the
/// caller (-32602 everywhere, not in listings), and is left as it was.
#[tokio::test]
async fn other_sessions_and_tenants_see_nothing() {
    let gateway = Gateway::on(common::migrated_pool().await, AuthMethod::ApiKeys, 0).await;
    let acme = gateway.key("acme", Role::Client).await;
    let globex = gateway.key("globex", Role::Client).await;
    let worker = gateway.key("*", Role::Worker).await;

    let owner = Caller::new(&gateway, Some(&acme)).initialize().await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    until_status(&owner, &id, "working").await;

    let other_session = Caller::new(&gateway, Some(&acme)).initialize().await;
    let other_tenant = Caller::new(&gateway, Some(&globex)).initialize().await;
    let mut other_tenant_same_session = other_tenant.clone();
    other_tenant_same_session.session = owner.session.clone();
    for stranger in [&other_session, &other_tenant, &other_tenant_same_session] {
        for method in ["tasks/get", "tasks/cancel", "tasks/result"] {
            assert_eq!(
                stranger.error_code(method, json!({"taskId": id})).await,
                -32602,
                "{method}"
            );
        }
        let listed = stranger.ok("tasks/list", json!({})).await;
        assert_eq!(listed["tasks"], json!([]), "{listed}");
    }
    // Through the extension, which has no sessions: the tenant still binds.
    let globex_raw = raw_caller(&gateway).with_token(&globex);
    assert_eq!(
        globex_raw
            .error_code("tasks/get", json!({"taskId": id}))
            .await,
        -32602
    );
    assert_eq!(
        globex_raw
            .error_code("tasks/cancel", json!({"taskId": id}))
            .await,
        -32602
    );
    let acme_raw = raw_caller(&gateway).with_token(&acme);
    assert_eq!(
        acme_raw.ok("tasks/get", json!({"taskId": id})).await["status"],
        "working"
    );
    assert_eq!(
        until_status(&owner, &id, "working").await["taskId"],
        id.as_str()
    );

    // Credentials: none, forged, or a worker's (workers do not call tools).
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let mut anonymous = owner.clone();
    anonymous.token = None;
    let refused = anonymous.post(ping, &[]).await;
    assert_eq!(refused.status, 401);
    let mut forged = owner.clone();
    forged.token = Some(format!("{}x", acme));
    assert_eq!(forged.post(ping, &[]).await.status, 401);
    forged.token = Some("tsk_not.a.key".to_owned());
    assert_eq!(forged.post(ping, &[]).await.status, 401);
    // Worker credentials may read tasks over gRPC (an attempt's reports),
    // never over MCP.
    let mut as_worker = Caller::new(&gateway, Some(&worker));
    as_worker.session = owner.session.clone();
    for (method, params) in [
        ("initialize", json!({"protocolVersion": "2025-11-25"})),
        ("tools/call", json!({"name": "echo", "task": {}})),
        ("tools/list", json!({})),
        ("tasks/get", json!({"taskId": id})),
        ("tasks/result", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        assert_eq!(
            as_worker.error_code(method, params).await,
            -32003,
            "{method}"
        );
    }
    let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                      "params": {"requestId": 1}});
    assert_eq!(as_worker.post(&note.to_string(), &[]).await.status, 202);
    assert_eq!(
        owner.ok("tasks/cancel", json!({"taskId": id})).await["status"],
        "cancelled"
    );
    gateway.stop().await;
}

/// An operator's key reaches every tenant on `/mcp` too, and names the
/// one it acts in with `X-Taskstore-Tenant`; naming none is refused.
#[tokio::test]
async fn an_admin_of_every_tenant_names_its_tenant_in_a_header() {
    let gateway = Gateway::on(common::migrated_pool().await, AuthMethod::ApiKeys, 0).await;
    let acme = gateway.key("acme", Role::Client).await;
    let admin = gateway.key("*", Role::Admin).await;
    let owner = Caller::new(&gateway, Some(&acme)).initialize().await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "echo", "arguments": {}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();

    let mut operator = Caller::new(&gateway, Some(&admin));
    operator.session = owner.session.clone();
    let get = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": id}})
        .to_string();
    let unnamed = operator.post(&get, &[]).await;
    assert_eq!(unnamed.status, 400, "{:?}", unnamed.body);
    assert!(
        unnamed.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("reach every tenant")),
        "{:?}",
        unnamed.body
    );
    let named = operator.post(&get, &[("x-taskstore-tenant", "acme")]).await;
    assert_eq!(
        named.body["result"]["taskId"],
        id.as_str(),
        "{:?}",
        named.body
    );
    let elsewhere = operator
        .post(&get, &[("x-taskstore-tenant", "globex")])
        .await;
    assert_eq!(
        elsewhere.body["error"]["code"], -32602,
        "{:?}",
        elsewhere.body
    );
    let malformed = operator.post(&get, &[("x-taskstore-tenant", "*")]).await;
    assert_eq!(malformed.status, 400, "{:?}", malformed.body);
    gateway.stop().await;
}

/// A viewer looks and changes nothing: over MCP as over gRPC.
#[tokio::test]
async fn a_viewer_reads_and_changes_nothing() {
    let gateway = Gateway::on(common::migrated_pool().await, AuthMethod::ApiKeys, 0).await;
    let owner = Caller::new(&gateway, Some(&gateway.key("acme", Role::Client).await))
        .initialize()
        .await;
    let created = owner
        .ok(
            "tools/call",
            json!({"name": "sleep", "arguments": {"ms": 60000}, "task": {}}),
        )
        .await;
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    let mut viewer = Caller::new(&gateway, Some(&gateway.key("acme", Role::Viewer).await));
    viewer.session = owner.session.clone();
    let tools = viewer.ok("tools/list", json!({})).await;
    assert!(tools["tools"].as_array().is_some_and(|t| !t.is_empty()));
    let seen = viewer.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(seen["taskId"], id.as_str());
    for (method, params) in [
        (
            "tools/call",
            json!({"name": "echo", "arguments": {}, "task": {}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let refused = viewer.rpc(method, params).await;
        assert_eq!(refused["error"]["code"], -32003, "{method}: {refused}");
        assert!(
            refused["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("the viewer role may not call")),
            "{refused}"
        );
    }
    let still = owner.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(still["status"], "working");
    gateway.stop().await;
}
