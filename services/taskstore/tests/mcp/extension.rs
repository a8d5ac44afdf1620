//! The 2026-07-28 revision (tasks as the `io.modelcontextprotocol/tasks`
//! extension), through the official Rust SDK's client.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities, ClientConfig,
    GetTaskParams, Implementation, ProtocolVersion, TASKS_EXTENSION_ID, TaskPayload, TaskStatus,
};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};

use crate::harness::{Caller, Gateway, error_code_of, result_of};

type Client = RunningService<RoleClient, ClientConfig>;

/// An rmcp client of `url` that speaks 2026-07-28, with or without the
/// tasks extension.
pub async fn rmcp_client(url: &str, tasks: bool) -> Client {
    let mut capabilities = ClientCapabilities::default();
    if tasks {
        capabilities.extensions = Some(
            [(TASKS_EXTENSION_ID.to_owned(), Default::default())]
                .into_iter()
                .collect(),
        );
    }
    let config = ClientConfig::new(capabilities, Implementation::new("taskstore-test", "1.0"));
    config
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(url.to_owned()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discovers the gateway")
}

/// One `tools/call` of `tool` with `arguments` (a JSON object).
async fn call(client: &Client, tool: &'static str, arguments: Value) -> CallToolResponse {
    let arguments = arguments.as_object().cloned().expect("an object");
    client
        .call_tool_once(CallToolRequestParams::new(tool).with_arguments(arguments))
        .await
        .expect("tools/call")
}

async fn until(client: &Client, task_id: &str, status: TaskStatus) -> TaskPayload {
    for _ in 0..200 {
        let got = client
            .peer()
            .get_task(GetTaskParams::new(task_id))
            .await
            .expect("tasks/get");
        if got.task.status() == status {
            return got.task.payload;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never became {status:?}");
}

/// Discover, list, call as a task, poll until the result is inlined,
/// cancel a long task: the SDK's own types parse every answer.
#[tokio::test]
async fn the_rust_sdk_runs_the_task_lifecycle() {
    let gateway = Gateway::open().await;
    let client = rmcp_client(&gateway.url(), true).await;
    let info = client.peer().peer_info().expect("discovered");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    assert!(info.capabilities.supports_tasks());

    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for expected in ["echo", "sleep", "only_task", "never_task", "broken"] {
        assert!(names.iter().any(|n| n == expected), "{names:?}");
    }

    let response = call(&client, "sleep", json!({"ms": 200})).await;
    let CallToolResponse::Task(created) = response else {
        panic!("a task handle expected, got {response:?}");
    };
    let id = created.task.task_id.clone();
    assert!(created.task.poll_interval_ms.is_some());
    let TaskPayload::Completed { result } = until(&client, &id, TaskStatus::Completed).await else {
        panic!("completed with a result");
    };
    assert_eq!(result["content"][0]["text"], "slept 200 ms");

    // A long task, cancelled: acknowledged, then seen cancelled.
    let response = call(&client, "sleep", json!({"ms": 60000})).await;
    let CallToolResponse::Task(long) = response else {
        panic!("a task handle expected");
    };
    until(&client, &long.task.task_id, TaskStatus::Working).await;
    client
        .peer()
        .cancel_task(CancelTaskParams::new(long.task.task_id.clone()))
        .await
        .expect("tasks/cancel is acknowledged");
    until(&client, &long.task.task_id, TaskStatus::Cancelled).await;
    // Cancelling again is acknowledged too (the revision's ack is not a
    // promise that anything changed).
    client
        .peer()
        .cancel_task(CancelTaskParams::new(long.task.task_id.clone()))
        .await
        .expect("acknowledged again");

    // A tool that cannot be a task answers at once.
    let response = call(&client, "never_task", json!({"y": 1})).await;
    let CallToolResponse::Complete(result) = response else {
        panic!("a direct result expected, got {response:?}");
    };
    assert_eq!(
        serde_json::to_value(&result).expect("json")["content"][0]["text"],
        r#"{"y":1}"#
    );

    // Unknown task: an error, not a panic or a hang.
    let unknown = client
        .peer()
        .get_task(GetTaskParams::new("0123456789abcdef0123456789abcdef"))
        .await;
    assert!(unknown.is_err(), "{unknown:?}");
    client.cancel().await.expect("closes");
    gateway.stop().await;
}

/// Without the tasks extension a client gets direct results, and a tool
/// that must be a task is refused with the capability it lacks.
#[tokio::test]
async fn without_the_extension_calls_are_synchronous() {
    let gateway = Gateway::open().await;
    let client = rmcp_client(&gateway.url(), false).await;
    let response = call(&client, "echo", json!({"text": "direct"})).await;
    let CallToolResponse::Complete(result) = response else {
        panic!("a direct result expected, got {response:?}");
    };
    assert_eq!(
        serde_json::to_value(&result).expect("json")["content"][0]["text"],
        "direct"
    );
    let refused = client
        .call_tool_once(CallToolRequestParams::new("only_task"))
        .await
        .expect_err("needs the extension");
    assert!(
        refused.to_string().contains("-32021") || refused.to_string().contains("extension"),
        "{refused}"
    );

    let raw = raw_caller(&gateway).without_extension();
    assert_eq!(
        raw.error_code("tasks/get", json!({"taskId": "x"})).await,
        -32021
    );
    client.cancel().await.expect("closes");
    gateway.stop().await;
}

/// A 2026-07-28 caller over plain HTTP: every request names the revision
/// and the client's capabilities in `_meta`, and the header agrees.
#[derive(Clone)]
pub struct RawExtensionCaller {
    caller: Caller,
    tasks: bool,
}

pub fn raw_caller(gateway: &Gateway) -> RawExtensionCaller {
    RawExtensionCaller {
        caller: Caller::new(gateway, None),
        tasks: true,
    }
}

impl RawExtensionCaller {
    pub fn without_extension(mut self) -> Self {
        self.tasks = false;
        self
    }

    pub fn with_token(mut self, token: &str) -> Self {
        self.caller.token = Some(token.to_owned());
        self
    }

    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let mut params = params;
        let extensions = if self.tasks {
            json!({"io.modelcontextprotocol/tasks": {}})
        } else {
            json!({})
        };
        let revision = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"extensions": extensions},
        });
        // The caller's own `_meta` entries stay beside the revision's.
        let mut meta = params["_meta"].as_object().cloned().unwrap_or_default();
        meta.extend(revision.as_object().cloned().unwrap_or_default());
        params["_meta"] = Value::Object(meta);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.caller
            .post(
                &body.to_string(),
                &[
                    ("mcp-protocol-version", "2026-07-28"),
                    ("mcp-method", method),
                ],
            )
            .await
            .body
    }

    pub async fn ok(&self, method: &str, params: Value) -> Value {
        result_of(method, self.rpc(method, params).await)
    }

    pub async fn error_code(&self, method: &str, params: Value) -> i64 {
        error_code_of(method, self.rpc(method, params).await)
    }
}
