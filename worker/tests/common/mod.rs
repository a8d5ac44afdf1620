//! End-to-end harness: real `taskstore` and `taskworker` processes, real
//! PostgreSQL (a fresh schema per test) and real RabbitMQ (a fresh queue
//! prefix per test, so parallel tests never see each other's jobs).

#![allow(dead_code)] // each test binary uses a different part

pub mod load;
mod logs;
mod process;
pub mod runs;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

pub use self::logs::Logs;
pub use self::process::Process;
use sqlx::postgres::PgPoolOptions;
use taskstore_proto::v1 as pb;
use tonic::transport::Channel;

use pb::task_store_client::TaskStoreClient;

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
}

pub fn amqp_url() -> String {
    std::env::var("AMQP_URL").unwrap_or_else(|_| DEFAULT_AMQP_URL.to_owned())
}

fn random_suffix() -> String {
    let mut bytes = [0u8; 6];
    getrandom::getrandom(&mut bytes).expect("os randomness");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `taskstore` binary, built beside this test's binary by
/// `cargo nextest run --workspace`.
pub fn taskstore_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target dir");
    let binary = dir.join("taskstore");
    assert!(
        binary.exists(),
        "{} is missing: run the tests with `cargo nextest run --workspace`",
        binary.display()
    );
    binary
}

/// A fresh schema; returns a database URL whose search_path is it.
async fn fresh_schema_url() -> String {
    let url = database_url();
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect(&url)
        .await
        .unwrap_or_else(|err| {
            panic!("PostgreSQL is not reachable at {url} (set DATABASE_URL): {err}")
        });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let schema = format!("tstest_{now}_{}", random_suffix());
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .expect("create schema");
    admin.close().await;
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

async fn check_rabbitmq() {
    let url = amqp_url();
    match lapin::Connection::connect(&url, lapin::ConnectionProperties::default()).await {
        Ok(connection) => {
            let _ = connection.close(200, "checked".into()).await;
        }
        Err(err) => panic!(
            "RabbitMQ is not reachable at {url} (set AMQP_URL, or start it with `rabbitmq-server -detached`): {err}"
        ),
    }
}

/// One test's world: a database schema, a queue prefix, the service and
/// workers.
pub struct Env {
    pub database_url: String,
    pub prefix: String,
    pub endpoint: String,
    pub service: Option<Process>,
    /// Where the running service serves `/metrics`, when asked to.
    pub metrics_endpoint: Option<String>,
    /// Variables set for every process the test starts (OpenTelemetry's).
    pub vars: Vec<(String, String)>,
    /// Every line the services started so far wrote to stderr.
    pub service_logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// A directory holding another build's `taskstore` and `taskworker`
    /// (the upgrade test's previous release), run instead of this build's.
    pub binaries: Option<PathBuf>,
}

impl Env {
    pub async fn new() -> Self {
        check_rabbitmq().await;
        Self {
            database_url: fresh_schema_url().await,
            prefix: format!("t{}", random_suffix()),
            endpoint: String::new(),
            service: None,
            metrics_endpoint: None,
            vars: Vec::new(),
            service_logs: std::sync::Arc::default(),
            binaries: None,
        }
    }

    /// Another world on the same database schema and queue prefix, with no
    /// process started yet and this build's binaries.
    pub fn sibling(&self) -> Self {
        Self {
            database_url: self.database_url.clone(),
            prefix: self.prefix.clone(),
            endpoint: String::new(),
            service: None,
            metrics_endpoint: None,
            vars: self.vars.clone(),
            service_logs: std::sync::Arc::default(),
            binaries: None,
        }
    }

    /// Starts (or restarts) the service; `extra` flags go after `serve`.
    pub fn start_service(&mut self, extra: &[&str]) {
        let mut args = vec!["--log-format", "json", "serve"];
        // Test defaults, each unless the test sets it itself.
        let defaults = [
            ("--auth", "none"),
            ("--listen", "127.0.0.1:0"),
            ("--lease-duration", "2s"),
            ("--reaper-interval", "300ms"),
            ("--relay-poll-interval", "200ms"),
            ("--retry-backoff-base", "100ms"),
            ("--retry-backoff-max", "400ms"),
            ("--shutdown-grace", "3s"),
            ("--cleanup-interval", "off"),
        ];
        for (flag, value) in defaults {
            if !extra.contains(&flag) {
                args.extend([flag, value]);
            }
        }
        args.extend_from_slice(extra);
        let binary = self
            .binaries
            .as_ref()
            .map_or_else(taskstore_binary, |dir| dir.join("taskstore"));
        let mut command = Command::new(binary);
        // A test that passes the URL in a file must not also pass it so.
        if !extra.contains(&"--database-url-file") {
            command.env("TASKSTORE_DATABASE_URL", &self.database_url);
        }
        let mut child = command
            .args(&args)
            .args(["--queue-prefix", &self.prefix])
            .env("TASKSTORE_AMQP_URL", amqp_url())
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn taskstore");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, lines) = std::sync::mpsc::channel();
        let kept = self.service_logs.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[taskstore] {line}");
                if let Ok(mut kept) = kept.lock() {
                    kept.push(line.clone());
                }
                let _ = sender.send(line);
            }
        });
        let process = Process {
            child,
            name: "taskstore".into(),
        };
        loop {
            let line = lines
                .recv_timeout(Duration::from_secs(60))
                .expect("the service starts listening");
            let Ok(event) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if event["message"] == "serving metrics on /metrics" {
                self.metrics_endpoint = event["addr"].as_str().map(str::to_owned);
            }
            if event["message"] == "listening" {
                self.endpoint = format!("http://{}", event["addr"].as_str().expect("addr"));
                break;
            }
        }
        self.service = Some(process);
    }

    /// Starts a worker serving `tools` (built-ins) and, optionally, the
    /// command tools in `command_tools`.
    pub fn start_worker(
        &self,
        name: &str,
        tools: &str,
        command_tools: Option<&std::path::Path>,
        extra: &[&str],
    ) -> Process {
        let binary = self.binaries.as_ref().map_or_else(
            || PathBuf::from(env!("CARGO_BIN_EXE_taskworker")),
            |dir| dir.join("taskworker"),
        );
        let mut command = Command::new(binary);
        command
            .args([
                "--endpoint",
                &self.endpoint,
                "--queue-prefix",
                &self.prefix,
                "--tools",
                tools,
            ])
            .args(["--worker-id", name])
            // Four slots unless the test says how many.
            .args(if extra.contains(&"--concurrency") {
                &[][..]
            } else {
                &["--concurrency", "4"][..]
            })
            .args(extra)
            .env("TASKWORKER_AMQP_URL", amqp_url())
            .env("TASKWORKER_SHUTDOWN_GRACE", "3s")
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(path) = command_tools {
            command.args(["--command-tools", path.to_str().expect("utf-8 path")]);
        }
        Process {
            child: command.spawn().expect("spawn taskworker"),
            name: name.to_owned(),
        }
    }

    /// A worker like [`Env::start_worker`], with JSON logs the test reads
    /// (and echoes), pointed at `endpoint`.
    pub fn start_worker_logged(
        &self,
        name: &str,
        tools: &str,
        command_tools: Option<&std::path::Path>,
        endpoint: &str,
        extra: &[&str],
    ) -> (Process, Logs) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_taskworker"));
        command
            .args(["--log-format", "json", "--endpoint", endpoint])
            .args(["--queue-prefix", &self.prefix, "--tools", tools])
            .args(["--worker-id", name, "--concurrency", "4"])
            .args(extra)
            .env("TASKWORKER_AMQP_URL", amqp_url())
            .env("TASKWORKER_SHUTDOWN_GRACE", "3s")
            .envs(self.vars.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(path) = command_tools {
            command.args(["--command-tools", path.to_str().expect("utf-8 path")]);
        }
        let mut child = command.spawn().expect("spawn taskworker");
        let logs = Logs::follow(child.stderr.take().expect("stderr"), name);
        (
            Process {
                child,
                name: name.to_owned(),
            },
            logs,
        )
    }

    /// Where the running service serves `/mcp` (started with
    /// `--mcp-listen`), from its `listening` line: `http://host:port`.
    pub fn mcp_address(&self) -> String {
        let logs = self.service_logs.lock().expect("logs").clone();
        logs.iter()
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .find(|event| event["message"] == "listening")
            .and_then(|event| event["mcp"].as_str().map(str::to_owned))
            .and_then(|url| url.strip_suffix("/mcp").map(str::to_owned))
            .expect("the listening line names the mcp endpoint")
    }

    pub async fn client(&self) -> TaskStoreClient<Channel> {
        let channel = tonic::transport::Endpoint::from_shared(self.endpoint.clone())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to taskstore");
        TaskStoreClient::new(channel)
    }

    /// Waits until at least `consumers` workers consume `tool`'s queue, so
    /// jobs dispatched next reach them at once.
    pub async fn wait_for_consumers(&self, tool: &str, consumers: u32) {
        let connection =
            lapin::Connection::connect(&amqp_url(), lapin::ConnectionProperties::default())
                .await
                .expect("rabbitmq");
        let queue = format!("{}.tool.{tool}", self.prefix);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            // A passive declare of a missing queue closes its channel: use a
            // new channel each time.
            let channel = connection.create_channel().await.expect("channel");
            let declared = channel
                .queue_declare(
                    queue.as_str().into(),
                    lapin::options::QueueDeclareOptions {
                        passive: true,
                        ..Default::default()
                    },
                    lapin::types::FieldTable::default(),
                )
                .await;
            if declared.is_ok_and(|q| q.consumer_count() >= consumers) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {consumers} consumers on {queue}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let _ = connection.close(200, "ready".into()).await;
    }

    /// Deletes this test's queues and exchange from the shared broker.
    pub async fn cleanup(&self, tools: &[&str]) {
        let Ok(connection) =
            lapin::Connection::connect(&amqp_url(), lapin::ConnectionProperties::default()).await
        else {
            return;
        };
        if let Ok(channel) = connection.create_channel().await {
            for tool in tools {
                let queue = format!("{}.tool.{tool}", self.prefix);
                let _ = channel
                    .queue_delete(
                        queue.as_str().into(),
                        lapin::options::QueueDeleteOptions::default(),
                    )
                    .await;
            }
            let exchange = format!("{}.jobs", self.prefix);
            let _ = channel
                .exchange_delete(
                    exchange.as_str().into(),
                    lapin::options::ExchangeDeleteOptions::default(),
                )
                .await;
        }
        let _ = connection.close(200, "cleaned up".into()).await;
    }
}

/// A CreateTask request that dispatches a `tools/call` of `tool`.
pub fn dispatch_request(
    tool: &str,
    arguments: Value,
    max_attempts: Option<u32>,
) -> pb::CreateTaskRequest {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": { "name": tool, "arguments": arguments },
    });
    pb::CreateTaskRequest {
        idempotency_key: None,
        no_expiry: false,
        poll_interval: None,
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: "1".into(),
        request_json: request.to_string(),
        dispatch: Some(pb::Dispatch {
            priority: Default::default(),
            start_at: None,
            start_after: None,
            tool: None,
            max_attempts,
        }),
    }
}

/// Creates a task dispatched to `tool` with `arguments`.
pub async fn dispatch(
    client: &mut TaskStoreClient<Channel>,
    tool: &str,
    arguments: Value,
    max_attempts: Option<u32>,
) -> String {
    let request = dispatch_request(tool, arguments, max_attempts);
    client
        .create_task(request)
        .await
        .expect("create")
        .into_inner()
        .task_id
}

/// Waits (blocking GetTaskResult) for the task's result.
pub async fn result(
    client: &mut TaskStoreClient<Channel>,
    task_id: &str,
    timeout: Duration,
) -> pb::GetTaskResultResponse {
    let mut request = tonic::Request::new(pb::GetTaskResultRequest {
        task_id: task_id.to_owned(),
        session_id: None,
        wait: true,
    });
    request.set_timeout(timeout);
    match client.get_task_result(request).await {
        Ok(response) => response.into_inner(),
        Err(status) => {
            let task = get(client, task_id).await;
            panic!("no result for {task_id}: {status:?}; task is {task:?}")
        }
    }
}

pub async fn get(client: &mut TaskStoreClient<Channel>, task_id: &str) -> pb::Task {
    client
        .get_task(pb::GetTaskRequest {
            task_id: task_id.to_owned(),
            session_id: None,
        })
        .await
        .expect("get")
        .into_inner()
}

/// The first text item of a CallToolResult.
pub fn text_of(result_json: &str) -> String {
    let result: Value = serde_json::from_str(result_json).expect("result is JSON");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Whether the task is running: claimed (the claim's message) or already
/// reporting progress.
pub async fn is_running(client: &mut TaskStoreClient<Channel>, task_id: &str) -> bool {
    let message = get(client, task_id)
        .await
        .status_message
        .unwrap_or_default();
    message.starts_with("running on") || message.starts_with("slept")
}

/// Polls until `check` holds (for states nothing pushes to the test).
pub async fn eventually<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
