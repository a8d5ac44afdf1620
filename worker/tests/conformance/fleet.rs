//! The conformance suite's world: a real `taskstore serve` with API keys on
//! PostgreSQL (a fresh schema) and RabbitMQ (a fresh queue prefix), and
//! worker **processes** of any language started with the command line of
//! `docs/worker-conformance.md`. The suite talks to the service (gRPC), to
//! the database (a task's attempts and lease holder, read-only) and to the
//! processes (signals); never to a worker's insides.

#![allow(dead_code)] // the suite and the mixed fleet use different parts

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use sqlx::postgres::{PgPool, PgPoolOptions};
use taskstore_proto::credentials::BearerToken;
use taskstore_proto::v1 as pb;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use crate::common::{self, Env};

#[path = "worker_process.rs"]
mod worker_process;
pub use worker_process::WorkerProcess;

/// A task-store client holding the test tenant's client key.
pub type Client = pb::task_store_client::TaskStoreClient<InterceptedService<Channel, BearerToken>>;

/// The tools the cases dispatch (every worker also serves `conf_noop`).
pub const CONF_TOOLS: &[&str] = &[
    "conf_echo",
    "conf_tool_error",
    "conf_retryable",
    "conf_back_off",
    "conf_crash",
    "conf_sleep",
    "conf_ask",
];

/// A worker implementation under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Language {
    Rust,
    Python,
    TypeScript,
}

const HOW_TO_BUILD: &str = "build it with `worker/tests/conformance/build-workers` (the README's test \
     command runs it before the tests); docs/worker-conformance.md says what the command must be";

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the repository root")
        .to_path_buf()
}

impl Language {
    pub const ALL: [Language; 3] = [Language::Rust, Language::Python, Language::TypeScript];

    pub fn name(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::TypeScript => "typescript",
        }
    }

    /// The worker command (program, leading arguments, working directory),
    /// or a panic naming the file that is missing and how to build it.
    fn command(self) -> (PathBuf, Vec<String>, PathBuf) {
        let root = repository();
        let must_exist = |path: &Path, what: &str| {
            assert!(
                path.exists(),
                "the {} conformance worker is missing: {what} {} does not exist; {HOW_TO_BUILD}",
                self.name(),
                path.display(),
            );
        };
        match self {
            Language::Rust => {
                let program = PathBuf::from(env!("CARGO_BIN_EXE_conformance-worker"));
                must_exist(&program, "the binary");
                (program, Vec::new(), root)
            }
            Language::Python => {
                let dir = root.join("clients/python");
                let program = dir.join(".venv/bin/mcp-taskstore-worker");
                must_exist(&program, "the console entry point");
                (program, vec!["mcp_taskstore.conformance:tools".into()], dir)
            }
            Language::TypeScript => {
                let dir = root.join("clients/typescript");
                let cli = dir.join("dist/worker/cli.js");
                let tools = dir.join("dist/worker/conformance.js");
                must_exist(&cli, "the worker command");
                must_exist(&tools, "the conformance tools module");
                let args = [cli, tools].map(|p| p.display().to_string()).into();
                (PathBuf::from("node"), args, dir)
            }
        }
    }
}

/// A service with API keys, and the test's client.
pub struct Fleet {
    pub env: Env,
    pub client: Client,
    worker_key: String,
    admin_key: String,
    pool: PgPool,
}

fn make_key(env: &Env, tenant: &str, role: &str) -> String {
    let output = Command::new(common::taskstore_binary())
        .args(["keys", "create", "--tenant", tenant, "--role", role])
        .args(["--name", "conformance", "--json"])
        .env("TASKSTORE_DATABASE_URL", &env.database_url)
        .output()
        .expect("run taskstore keys create");
    assert!(output.status.success(), "keys create: {output:?}");
    let made: Value = serde_json::from_slice(&output.stdout).expect("json");
    made["key"].as_str().expect("key").to_owned()
}

impl Fleet {
    /// The service (`--auth api-keys`, 2 s leases) and keys for a client
    /// of tenant `acme`, the workers (every tenant) and an admin.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    /// As [`Fleet::start`], with more flags for `serve`.
    pub async fn start_with(flags: &[&str]) -> Self {
        let mut env = Env::new().await;
        let mut all = vec!["--auth", "api-keys"];
        all.extend_from_slice(flags);
        env.start_service(&all);
        let client_key = make_key(&env, "acme", "client");
        let worker_key = make_key(&env, "*", "worker");
        let admin_key = make_key(&env, "*", "admin");
        let channel = tonic::transport::Endpoint::from_shared(env.endpoint.clone())
            .expect("endpoint")
            .connect()
            .await
            .expect("connect to taskstore");
        let token = BearerToken::new(&client_key).expect("a well-formed key");
        let client = Client::new(InterceptedService::new(channel, token));
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect(&env.database_url)
            .await
            .expect("PostgreSQL");
        Self {
            env,
            client,
            worker_key,
            admin_key,
            pool,
        }
    }

    /// Starts a worker process serving the conformance tools.
    pub fn spawn(
        &self,
        language: Language,
        id: &str,
        concurrency: usize,
        grace: &str,
    ) -> WorkerProcess {
        let (endpoint, amqp) = (self.env.endpoint.clone(), common::amqp_url());
        self.spawn_at(language, id, concurrency, grace, &endpoint, &amqp)
    }

    /// As [`Fleet::spawn`], pointed at `endpoint` and the broker at `amqp`.
    pub fn spawn_at(
        &self,
        language: Language,
        id: &str,
        concurrency: usize,
        grace: &str,
        endpoint: &str,
        amqp: &str,
    ) -> WorkerProcess {
        let (program, leading, dir) = language.command();
        let concurrency = concurrency.to_string();
        let mut child = Command::new(&program)
            .args(&leading)
            .args(["--endpoint", endpoint])
            .args(["--amqp-url", amqp])
            .args(["--queue-prefix", &self.env.prefix])
            .args(["--concurrency", &concurrency, "--worker-id", id])
            .args(["--shutdown-grace", grace, "--token", &self.worker_key])
            .current_dir(dir)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start the {} worker {}: {err}",
                    language.name(),
                    program.display()
                )
            });
        let stderr = child.stderr.take().expect("stderr");
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let kept = tail.clone();
        let name = id.to_owned();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[{name}] {line}");
                if let Ok(mut kept) = kept.lock() {
                    if kept.len() == 40 {
                        kept.pop_front();
                    }
                    kept.push_back(line);
                }
            }
        });
        WorkerProcess {
            id: id.to_owned(),
            language,
            child,
            tail,
            exit: None,
        }
    }

    /// A worker, once it consumes every conformance queue; `consumers` is
    /// how many workers consume them then, counting it.
    pub async fn start_worker(
        &self,
        language: Language,
        id: &str,
        concurrency: usize,
        grace: &str,
        consumers: u32,
    ) -> WorkerProcess {
        let mut worker = self.spawn(language, id, concurrency, grace);
        self.wait_consuming(&mut worker, CONF_TOOLS, consumers)
            .await;
        worker
    }

    /// Waits until `consumers` consumers are on each of `tools`' queues,
    /// failing at once, with its last lines, if `worker` dies meanwhile.
    pub async fn wait_consuming(&self, worker: &mut WorkerProcess, tools: &[&str], consumers: u32) {
        let connection =
            lapin::Connection::connect(&common::amqp_url(), lapin::ConnectionProperties::default())
                .await
                .expect("rabbitmq");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        for tool in tools {
            let queue = format!("{}.tool.{tool}", self.env.prefix);
            loop {
                if let Some(status) = worker.exited() {
                    panic!(
                        "the {} worker {} exited ({status}) before it consumed {queue}; its last lines:\n{}",
                        worker.language.name(),
                        worker.id,
                        worker.tail()
                    );
                }
                // A passive declare of a missing queue closes its channel.
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
                    let _ = channel.close(200, "seen".into()).await;
                    break;
                }
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the {} worker {} never consumed {queue} ({consumers} consumers expected); its last lines:\n{}",
                    worker.language.name(),
                    worker.id,
                    worker.tail()
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        let _ = connection.close(200, "ready".into()).await;
        // And the service lists them: a worker may consume before the
        // heartbeat that lists its tools arrives (the Python and TypeScript
        // ones list them once their queues exist), and a create meanwhile
        // would not get what the tool declares (its retry policy, say).
        loop {
            let listed = self
                .client
                .clone()
                .list_tools(pb::ListToolsRequest {})
                .await
                .expect("list tools")
                .into_inner()
                .tools;
            let serves = |tool: &&str| {
                listed
                    .iter()
                    .any(|t| t.name == *tool && t.consuming >= consumers)
            };
            if tools.iter().all(serves) {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the service never listed the {} worker {}'s tools; its last lines:\n{}",
                worker.language.name(),
                worker.id,
                worker.tail()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn dispatch(
        &self,
        tool: &str,
        arguments: Value,
        max_attempts: Option<u32>,
    ) -> String {
        let request = common::dispatch_request(tool, arguments, max_attempts);
        self.client
            .clone()
            .create_task(request)
            .await
            .expect("create")
            .into_inner()
            .task_id
    }

    pub async fn get(&self, id: &str) -> pb::Task {
        self.client
            .clone()
            .get_task(pb::GetTaskRequest {
                task_id: id.to_owned(),
                session_id: None,
            })
            .await
            .expect("get")
            .into_inner()
    }

    /// The task's result, waiting for it up to `timeout`.
    pub async fn result(&self, id: &str, timeout: Duration) -> pb::GetTaskResultResponse {
        let mut request = tonic::Request::new(pb::GetTaskResultRequest {
            task_id: id.to_owned(),
            session_id: None,
            wait: true,
        });
        request.set_timeout(timeout);
        match self.client.clone().get_task_result(request).await {
            Ok(response) => response.into_inner(),
            Err(status) => {
                let task = self.get(id).await;
                panic!("no result for {id} within {timeout:?}: {status:?}; the task: {task:?}")
            }
        }
    }

    /// The task's claims so far (a graceful stop gives its claim back) and
    /// the worker holding its lease now (none once it is terminal), from
    /// the database.
    pub async fn attempts(&self, id: &str) -> (i32, Option<String>) {
        sqlx::query_as(
            "SELECT attempt, CASE WHEN lease_token IS NOT NULL \
             AND status IN ('working', 'input_required') THEN lease_owner END \
             FROM tasks WHERE task_id = $1",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .expect("read the task's attempts")
    }

    /// Whether the task's running attempt was claimed in its worker's
    /// session, and that session is alive: the worker keeps one renewal for
    /// all of its attempts (docs/execution.md, "Liveness per worker").
    pub async fn claimed_in_a_live_session(&self, id: &str) -> bool {
        sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM tasks t JOIN worker_sessions s              ON s.session_id = t.lease_session              WHERE t.task_id = $1 AND t.lease_token IS NOT NULL AND s.expires_at > now())",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await
        .expect("read the task's session")
    }

    /// The tasks of `tool` that `worker` holds a lease on now.
    pub async fn tasks_held(&self, worker: &str, tool: &str) -> Vec<String> {
        sqlx::query_scalar(
            "SELECT task_id FROM tasks WHERE lease_owner = $1 AND tool = $2 \
             AND lease_token IS NOT NULL AND status IN ('working', 'input_required')",
        )
        .bind(worker)
        .bind(tool)
        .fetch_all(&self.pool)
        .await
        .expect("read the leases")
    }

    /// Waits until `check` holds of the task.
    pub async fn until(
        &self,
        what: &str,
        id: &str,
        timeout: Duration,
        check: impl Fn(&pb::Task) -> bool,
    ) -> pb::Task {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let task = self.get(id).await;
            if check(&task) {
                return task;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out after {timeout:?} waiting until {what}; the task: {task:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until `check` holds of the task as its followers see it
    /// (WatchTask): progress reaches followers at once, and reads only when
    /// it is written, every few seconds (docs/execution.md, "Progress").
    pub async fn until_seen(
        &self,
        what: &str,
        id: &str,
        timeout: Duration,
        check: impl Fn(&pb::Task) -> bool,
    ) -> pb::Task {
        let mut watch = self
            .client
            .clone()
            .watch_task(pb::WatchTaskRequest {
                task_id: id.to_owned(),
                ..Default::default()
            })
            .await
            .expect("WatchTask")
            .into_inner();
        let seen = async {
            loop {
                match watch.message().await.expect("the watch") {
                    Some(task) if check(&task) => return task,
                    Some(_) => {}
                    None => panic!("the task ended before {what}"),
                }
            }
        };
        tokio::time::timeout(timeout, seen)
            .await
            .unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting until {what}"))
    }

    /// `taskstore status --json` with the admin key.
    pub fn status_json(&self) -> Value {
        let output = Command::new(common::taskstore_binary())
            .args(["status", "--json", "--endpoint", &self.env.endpoint])
            .env("TASKSTORE_TOKEN", &self.admin_key)
            .output()
            .expect("run taskstore status");
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|err| panic!("taskstore status --json: {err}: {output:?}"))
    }

    pub async fn cleanup(&self) {
        let mut tools = CONF_TOOLS.to_vec();
        tools.push("conf_noop");
        self.env.cleanup(&tools).await;
    }
}

/// The first text item of a stored result.
pub fn text(result: &pb::GetTaskResultResponse) -> String {
    common::text_of(&result.result_json)
}

/// An elicitation answer.
pub fn accept() -> Value {
    json!({"action": "accept", "content": {}})
}
