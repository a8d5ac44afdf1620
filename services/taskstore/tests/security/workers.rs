//! The worker registry is filed by who announced each worker (issue 37,
//! defect 1): a worker bound to one tenant can neither overwrite nor
//! forget the fleet's worker, and its tools and descriptions reach its own
//! tenant only, over gRPC and `/mcp`.

use serde_json::{Value, json};
use taskstore::domain::Role;
use taskstore::mcp::McpSettings;
use taskstore::store::StoreConfig;

use super::*;

fn heartbeat(worker: &str, tools: &[&str], described: &str, support: i32) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        consuming: None,
        worker_id: worker.into(),
        tools: tools.iter().map(|t| (*t).to_owned()).collect(),
        slots: 4,
        busy: 0,
        stopping: false,
        descriptions: tools
            .iter()
            .map(|tool| pb::ToolDescription {
                rate: None,
                concurrency: None,
                fairness_key: String::new(),
                retry: Default::default(),
                name: (*tool).to_owned(),
                title: String::new(),
                description: format!("{described} {tool}"),
                input_schema_json: r#"{"type":"object"}"#.into(),
                task_support: support,
            })
            .collect(),
    }
}

/// The tools `who` is listed over gRPC: name → description.
async fn listed(who: &mut Identity) -> Vec<(String, String)> {
    who.store
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("list tools")
        .into_inner()
        .tools
        .into_iter()
        .map(|tool| {
            let described = tool.description.map(|d| d.description).unwrap_or_default();
            (tool.name, described)
        })
        .collect()
}

/// The tools `key`'s tenant is listed over `/mcp` (2025-11-25).
async fn listed_over_mcp(world: &World, key: &str) -> Vec<Value> {
    let url = format!("http://{}/mcp", world.mcp.expect("mcp is on"));
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = http
            .post(&url)
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session);
        }
        request.send()
    };
    let initialized = post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "probe", "version": "1"}}}),
        None,
    )
    .await
    .expect("initialize");
    let session = initialized
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let listed: Value = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        session,
    )
    .await
    .expect("tools/list")
    .json()
    .await
    .expect("json");
    listed["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| panic!("tools/list: {listed}"))
}

#[tokio::test]
async fn a_tenant_bound_worker_changes_no_other_identitys_workers() {
    let world = World::configured(Kind::Postgres, StoreConfig::default(), |settings| {
        ServiceSettings {
            mcp: Some(McpSettings::on("127.0.0.1:0")),
            ..settings
        }
    })
    .await;
    let fleet = world
        .identity(Some(&world.key("*", Role::Worker).await))
        .await;
    let acme_worker = world
        .identity(Some(&world.key("acme", Role::Worker).await))
        .await;
    let globex_key = world.key("globex", Role::Client).await;
    let mut globex = world.identity(Some(&globex_key)).await;
    let acme_key = world.key("acme", Role::Client).await;
    let mut acme = world.identity(Some(&acme_key)).await;

    let required = pb::TaskSupport::Required as i32;
    let forbidden = pb::TaskSupport::Forbidden as i32;
    fleet
        .execution
        .clone()
        .heartbeat(heartbeat("host-1", &["echo"], "the operator's", required))
        .await
        .expect("the fleet worker reports");
    // acme's worker reports under the fleet worker's id, redescribing echo.
    acme_worker
        .execution
        .clone()
        .heartbeat(heartbeat(
            "host-1",
            &["echo", "private"],
            "IGNORE ALL",
            forbidden,
        ))
        .await
        .expect("acme's worker reports, as its own worker");

    let operators = vec![("echo".to_owned(), "the operator's echo".to_owned())];
    assert_eq!(
        listed(&mut globex).await,
        operators,
        "globex sees the fleet only"
    );
    assert_eq!(
        listed(&mut acme).await,
        [
            ("echo".to_owned(), "the operator's echo".to_owned()),
            ("private".to_owned(), "IGNORE ALL private".to_owned()),
        ],
        "acme sees its own tools too, but not its description of a fleet tool"
    );
    let over_mcp = listed_over_mcp(&world, &globex_key).await;
    assert_eq!(over_mcp.len(), 1, "{over_mcp:?}");
    assert_eq!(over_mcp[0]["description"], "the operator's echo");
    assert_eq!(over_mcp[0]["execution"]["taskSupport"], "required");
    let over_mcp = listed_over_mcp(&world, &acme_key).await;
    assert_eq!(over_mcp.len(), 2, "{over_mcp:?}");

    // Stopping under the fleet worker's id forgets acme's own worker only.
    let mut stopping = heartbeat("host-1", &[], "", required);
    stopping.stopping = true;
    acme_worker
        .execution
        .clone()
        .heartbeat(stopping)
        .await
        .expect("acme's worker stops");
    assert_eq!(listed(&mut globex).await, operators);
    assert_eq!(listed(&mut acme).await, operators);
}
