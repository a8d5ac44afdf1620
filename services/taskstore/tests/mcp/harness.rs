//! Gateways for the tests: real services (`Service::build`, as `taskstore
//! mcp` builds them) on a fresh PostgreSQL schema, with embedded workers on
//! the in-process queue, MCP on an ephemeral port; and a plain HTTP
//! JSON-RPC caller for what SDK clients would never send.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::PgPool;
use taskstore::auth::AuthMethod;
use taskstore::domain::Role;
use taskstore::grpc::InputLimits;
use taskstore::mcp::McpSettings;
use taskstore::settings::{
    ChoreSettings, EmbeddedWorkers, QueueLocation, QueueSettings, ServiceSettings,
};
use taskstore::startup::{Backends, Service};
use taskstore::store::StoreConfig;
use taskstore::store::keys::{KeyStore, PgKeys};
use taskstore::store::postgres::PgTaskStore;
use taskstore_proto::jobs::Topology;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::common;

/// Command tools with each `taskSupport` the built-ins do not have.
const COMMAND_TOOLS: &str = r#"{"tools": {
  "only_task": {"command": ["cat"], "description": "Says its arguments back; only as a task.", "task_support": "required",
                "input_schema": {"type": "object", "properties": {"x": {"type": "integer"}}}},
  "never_task": {"command": ["cat"], "title": "Never a task", "task_support": "forbidden"},
  "broken": {"command": ["sh", "-c", "echo broken; exit 3"], "description": "Always ends with an error result."},
  "ask_twice": {"command": ["python3", "-c", "import json,sys\nsys.stdin.readline()\nfor k in ('first','second'):\n  print(json.dumps({'taskstore':'ask','key':k,'request':{'method':'elicitation/create','params':{'message':k+'?','requestedSchema':{'type':'object','properties':{'v':{'type':'string'}}}}}}),file=sys.stderr,flush=True)\nans={}\nfor _ in range(2):\n  a=json.loads(sys.stdin.readline())\n  ans[a['key']]=a['answer']['content']['v']\nprint(ans['first']+' '+ans['second'])"],
                "interactive": true, "description": "Asks two questions; answers with both."},
  "ask_direct": {"command": ["python3", "-c", "import json,sys\nsys.stdin.readline()\nprint(json.dumps({'taskstore':'ask','key':'ok','request':{'method':'elicitation/create','params':{'message':'Go?','requestedSchema':{'type':'object','properties':{}}}}}),file=sys.stderr,flush=True)\na=json.loads(sys.stdin.readline())\nprint('answered '+a['answer']['action'])"],
                 "interactive": true, "task_support": "forbidden", "description": "Asks, never as a task."}
}}"#;

/// A running gateway.
pub struct Gateway {
    pub mcp: SocketAddr,
    pub keys: Arc<dyn KeyStore>,
    stop: Option<DropGuard>,
    handle: Option<tokio::task::JoinHandle<()>>,
}

impl Gateway {
    /// A gateway with authentication off, on its own database.
    pub async fn open() -> Self {
        Self::on(common::migrated_pool().await, AuthMethod::None, 0).await
    }

    /// A gateway on `pool` (shared by replicas), with `auth`, serving MCP
    /// on `port` (0: any).
    pub async fn on(pool: PgPool, auth: AuthMethod, port: u16) -> Self {
        Self::on_with(pool, auth, port, |_| {}).await
    }

    /// As [`Gateway::on`], with its MCP settings adjusted.
    pub async fn on_with(
        pool: PgPool,
        auth: AuthMethod,
        port: u16,
        adjust: impl FnOnce(&mut McpSettings),
    ) -> Self {
        Self::build(pool, auth, port, adjust, true).await
    }

    /// A replica that serves the APIs only: no queue, no workers (its
    /// stopping stops no task; the other replicas' workers run them).
    pub async fn api_only(pool: PgPool) -> Self {
        Self::build(pool, AuthMethod::None, 0, |_| {}, false).await
    }

    async fn build(
        pool: PgPool,
        auth: AuthMethod,
        port: u16,
        adjust: impl FnOnce(&mut McpSettings),
        workers: bool,
    ) -> Self {
        let mut mcp = McpSettings::on(format!("127.0.0.1:{port}"));
        adjust(&mut mcp);
        let dir = std::env::temp_dir().join(format!("mcp-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let tools_file = dir.join("tools.json");
        std::fs::write(&tools_file, COMMAND_TOOLS).expect("command tools");
        let config = StoreConfig::default();
        let store = Arc::new(
            PgTaskStore::open(pool.clone(), config.clone())
                .await
                .expect("open the store"),
        );
        let keys: Arc<dyn KeyStore> = Arc::new(PgKeys::new(pool));
        let backends =
            Backends::from_store(store, "postgres", "a test schema".into()).with_keys(keys.clone());
        let mut settings = ServiceSettings {
            auth: vec![auth],
            mcp: Some(mcp),
            queue: Some(QueueSettings {
                location: QueueLocation::InProcess,
                broker_tls: Default::default(),
                topology: Topology::new("taskstore").expect("topology"),
                poll_interval: Duration::from_millis(200),
                fault: None,
            }),
            chores: Some(ChoreSettings {
                reaper_interval: Duration::from_secs(1),
                cleanup_interval: None,
            }),
            embedded: EmbeddedWorkers {
                count: 1,
                concurrency: 8,
                tools: vec!["echo".into(), "sleep".into()],
                command_tools: Some(tools_file),
                shutdown_grace: Duration::ZERO,
                park_after: Duration::from_secs(60),
            },
            ..ServiceSettings::bare(config, InputLimits::default())
        };
        if !workers {
            settings.queue = None;
            settings.embedded.count = 0;
        }
        let service = Service::build(settings, backends).await.expect("builds");
        let mcp = service.mcp_addr().expect("mcp is on");
        let stop = CancellationToken::new();
        let token = stop.clone();
        let handle = tokio::spawn(async move {
            service.run_until_stopped(token).await.expect("runs");
        });
        let gateway = Self {
            mcp,
            keys,
            stop: Some(stop.drop_guard()),
            handle: Some(handle),
        };
        let token = match auth {
            AuthMethod::None => None,
            _ => Some(gateway.key("default", Role::Client).await),
        };
        gateway.wait_for_tools(token.as_deref()).await;
        gateway
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.mcp)
    }

    /// Stops it and waits until it has stopped (its port is free again).
    pub async fn stop(mut self) {
        drop(self.stop.take());
        if let Some(handle) = self.handle.take() {
            handle.await.expect("stopped");
        }
    }

    /// A fresh API key for `role` in `tenant`.
    pub async fn key(&self, tenant: &str, role: Role) -> String {
        common::issue_key(self.keys.as_ref(), tenant, role).await
    }

    /// Until the embedded workers have reported their tools.
    async fn wait_for_tools(&self, token: Option<&str>) {
        let caller = Caller::new(self, token);
        for _ in 0..100 {
            let session = caller.clone().initialize().await;
            let tools = session.rpc("tools/list", json!({})).await;
            if tools["result"]["tools"]
                .as_array()
                .is_some_and(|t| t.len() >= 5)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the embedded workers did not report their tools");
    }
}

/// A JSON-RPC caller over plain HTTP (2025-11-25 unless told otherwise).
#[derive(Clone)]
pub struct Caller {
    pub http: reqwest::Client,
    pub url: String,
    pub token: Option<String>,
    pub session: Option<String>,
    /// Sent with every request (a tenant, a protocol version).
    pub extra_headers: Vec<(String, String)>,
}

impl Caller {
    pub fn new(gateway: &Gateway, token: Option<&str>) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: gateway.url(),
            token: token.map(str::to_owned),
            session: None,
            extra_headers: Vec::new(),
        }
    }

    /// The same caller, at another gateway.
    pub fn at(&self, gateway: &Gateway) -> Self {
        Self {
            url: gateway.url(),
            ..self.clone()
        }
    }

    /// After the 2025-11-25 handshake, with its session.
    pub async fn initialize(mut self) -> Self {
        let response = self
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "test", "version": "1"}}})
                .to_string(),
                &[],
            )
            .await;
        assert_eq!(response.status, 200, "{:?}", response.body);
        self.session = Some(response.session.expect("a session id"));
        self
    }

    /// POSTs `body` with `headers`, and the caller's credentials and session.
    pub async fn post(&self, body: &str, headers: &[(&str, &str)]) -> Answer {
        let mut request = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .body(body.to_owned());
        if !headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-type"))
        {
            request = request.header("content-type", "application/json");
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
        }
        for (name, value) in &self.extra_headers {
            request = request.header(name, value);
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let response = request.send().await.expect("the gateway answers");
        let status = response.status().as_u16();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let text = response.text().await.expect("a body");
        Answer {
            status,
            session,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    /// A request; the whole JSON-RPC response.
    pub async fn rpc(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.post(&body.to_string(), &[]).await.body
    }

    /// The `result` of a request that must succeed.
    pub async fn ok(&self, method: &str, params: Value) -> Value {
        result_of(method, self.rpc(method, params).await)
    }

    /// The error code of a request that must fail.
    pub async fn error_code(&self, method: &str, params: Value) -> i64 {
        error_code_of(method, self.rpc(method, params).await)
    }
}

/// The `result` of a JSON-RPC response that must be a success.
pub fn result_of(method: &str, response: Value) -> Value {
    assert!(response.get("error").is_none(), "{method}: {response}");
    response["result"].clone()
}

/// The error code of a JSON-RPC response that must be an error.
pub fn error_code_of(method: &str, response: Value) -> i64 {
    response["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{method} should fail: {response}"))
}

/// What the gateway answered.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub session: Option<String>,
    pub body: Value,
}

/// Polls `tasks/get` until the task is in `status`.
pub async fn until_status(caller: &Caller, task_id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let task = caller.ok("tasks/get", json!({"taskId": task_id})).await;
        if task["status"] == status {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {task_id} never became {status}");
}

/// A server-sent event stream, read event by event.
pub struct Events {
    response: reqwest::Response,
    buffer: String,
    /// The id of the last event read that had one.
    pub last_id: Option<String>,
    /// The retry delay the last event gave, if any.
    pub retry: Option<String>,
}

/// One event: its data (JSON, `None` when empty) and id.
#[derive(Debug)]
pub struct Event {
    pub data: Option<Value>,
    pub id: Option<String>,
}

impl Events {
    /// POSTs `body`, whose answer must be an event stream.
    pub async fn open(caller: &Caller, body: Value) -> Self {
        let request = caller
            .http
            .post(&caller.url)
            .header("content-type", "application/json")
            .body(body.to_string());
        Self::expect_stream(Self::send(caller, request).await)
    }

    /// `GET /mcp`, resuming after `last_id` when given.
    pub async fn get(caller: &Caller, last_id: Option<&str>) -> Self {
        Self::expect_stream(Self::get_response(caller, last_id).await)
    }

    /// `GET /mcp`, whatever it answers.
    pub async fn get_response(caller: &Caller, last_id: Option<&str>) -> reqwest::Response {
        let mut request = caller.http.get(&caller.url);
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        Self::send(caller, request).await
    }

    async fn send(caller: &Caller, request: reqwest::RequestBuilder) -> reqwest::Response {
        let mut request = request.header("accept", "application/json, text/event-stream");
        if let Some(token) = &caller.token {
            request = request.bearer_auth(token);
        }
        if let Some(session) = &caller.session {
            request = request.header("mcp-session-id", session);
        }
        for (name, value) in &caller.extra_headers {
            request = request.header(name, value);
        }
        request.send().await.expect("the gateway answers")
    }

    fn expect_stream(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "{:?}", response.headers());
        let kind = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(kind.starts_with("text/event-stream"), "{kind}");
        Self {
            response,
            buffer: String::new(),
            last_id: None,
            retry: None,
        }
    }

    /// The next event (with data or not), or `None` when the stream ended.
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| -> Vec<String> {
                    raw.lines()
                        .filter_map(|line| line.strip_prefix(name))
                        .map(|v| v.trim_start().to_owned())
                        .collect()
                };
                let (data, id, retry) = (field("data:"), field("id:"), field("retry:"));
                if data.is_empty() && id.is_empty() && retry.is_empty() {
                    continue; // a keep-alive comment
                }
                let id = id.into_iter().next();
                if id.is_some() {
                    self.last_id.clone_from(&id);
                }
                if let Some(retry) = retry.into_iter().next() {
                    self.retry = Some(retry);
                }
                let data: String = data.concat();
                let data = (!data.is_empty())
                    .then(|| serde_json::from_str(&data).expect("an event is JSON"));
                return Some(Event { data, id });
            }
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.response.chunk())
                .await
                .expect("an event within 30 s")
                .expect("the stream reads")?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next event's data, as JSON (events without data skipped).
    pub async fn next(&mut self) -> Value {
        loop {
            let event = self.next_event().await.expect("the stream has not ended");
            if let Some(data) = event.data {
                return data;
            }
        }
    }
}
