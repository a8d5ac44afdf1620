//! The `taskstore` binary end to end: `serve` on an ephemeral port with JSON
//! logs, every client command against it, then SIGTERM and a clean exit.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_taskstore");

struct Service {
    child: Child,
    endpoint: String,
    logs: std::sync::mpsc::Receiver<String>,
}

impl Drop for Service {
    fn drop(&mut self) {
        // Already exited in the passing case; reaped either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `taskstore serve` on a fresh schema and waits for its "listening"
/// log line, which names the address.
async fn start_service() -> Service {
    let (_, schema) = common::fresh_schema().await;
    let separator = if common::database_url().contains('?') {
        '&'
    } else {
        '?'
    };
    let url = format!(
        "{}{separator}options=-c%20search_path%3D{schema}",
        common::database_url()
    );
    let mut command = Command::new(BIN);
    command
        .args(["--log-format", "json", "serve", "--listen", "127.0.0.1:0"])
        .args(["--shutdown-grace", "5s"])
        .env("TASKSTORE_DATABASE_URL", url);
    launch(command).0
}

/// Runs `command` (a `taskstore serve` or `dev` with JSON logs) and waits for
/// its `listening` log line, which names the address; returns the service
/// and that line.
fn launch(mut command: Command) -> (Service, serde_json::Value) {
    let child = command
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn taskstore");
    let (sender, logs) = std::sync::mpsc::channel();
    let mut service = Service {
        child,
        endpoint: String::new(),
        logs,
    };
    let stderr = service.child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    loop {
        let line = service
            .logs
            .recv_timeout(Duration::from_secs(30))
            .expect("the service logs that it listens");
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("every log line is JSON ({err}): {line}"));
        if event["message"] == "listening" {
            let addr = event["addr"].as_str().expect("addr field");
            service.endpoint = format!("http://{addr}");
            return (service, event);
        }
    }
}

/// Runs a client command, bounded: a hang fails the test naming the command.
fn client(service: &Service, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .args(["--endpoint", &service.endpoint])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the client");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("`taskstore {}` did not finish within 60 s", args.join(" "));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("client output")
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

#[tokio::test]
async fn serve_answers_every_client_command_and_stops_cleanly_on_sigterm() {
    let mut service = start_service().await;

    let created = json(&client(
        &service,
        &[
            "create",
            "--tool",
            "echo",
            "--arguments",
            r#"{"text":"hi"}"#,
            "--json",
        ],
    ));
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttl"], 3_600_000, "the default ttl, in ms");
    assert_eq!(created["pollInterval"], 1000);
    let id = created["taskId"].as_str().expect("taskId").to_owned();

    let shown = client(&service, &["get", &id]);
    assert!(shown.status.success());
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains(&id) && text.contains("working"), "{text}");

    let updated = json(&client(
        &service,
        &[
            "update",
            &id,
            "--status",
            "input_required",
            "--message",
            "which file?",
            "--json",
        ],
    ));
    assert_eq!(updated["status"], "input_required");
    assert_eq!(updated["statusMessage"], "which file?");

    let result = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
    let done = json(&client(
        &service,
        &["complete", &id, "--result", result, "--json"],
    ));
    assert_eq!(done["status"], "completed");
    let fetched = json(&client(&service, &["result", &id, "--json"]));
    assert_eq!(fetched["result"]["content"][0]["text"], "hi");
    assert_eq!(fetched["task"]["status"], "completed");

    let other = json(&client(
        &service,
        &[
            "create",
            "--request",
            r#"{"method":"tools/call"}"#,
            "--task-id",
            "mine",
            "--json",
        ],
    ));
    assert_eq!(other["taskId"], "mine");
    let cancelled = json(&client(&service, &["cancel", "mine", "--json"]));
    assert_eq!(cancelled["status"], "cancelled");

    let listed = json(&client(
        &service,
        &["list", "--all", "--page-size", "1", "--json"],
    ));
    assert_eq!(listed["tasks"][0]["taskId"], id.as_str());

    let missing = client(&service, &["get", "nope"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("task not found"));
    let bad = client(&service, &["complete", &id, "--result", "[1]"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--result must be a JSON object"));

    let pid = service.child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = wait_with_timeout(&mut service.child, Duration::from_secs(20));
    assert!(status.success(), "exit status {status:?}");
    let rest: Vec<String> = service.logs.try_iter().collect();
    assert!(
        rest.iter().any(|line| line.contains("\"stopped\"")),
        "{rest:?}"
    );
}

#[test]
fn help_documents_every_flag_and_its_environment_variable() {
    let help = Command::new(BIN)
        .args(["serve", "--help"])
        .output()
        .expect("help");
    let text = String::from_utf8_lossy(&help.stdout);
    for env in [
        "TASKSTORE_LISTEN",
        "TASKSTORE_DATABASE_URL",
        "TASKSTORE_DEFAULT_TTL",
        "TASKSTORE_MAX_TTL",
        "TASKSTORE_POLL_INTERVAL",
        "TASKSTORE_MAX_PAGE_SIZE",
        "TASKSTORE_MAX_TASKS",
        "TASKSTORE_MAX_TASKS_PER_SESSION",
        "TASKSTORE_CLEANUP_INTERVAL",
        "TASKSTORE_DB_MAX_CONNECTIONS",
        "TASKSTORE_DB_ACQUIRE_TIMEOUT",
        "TASKSTORE_MAX_JSON_BYTES",
        "TASKSTORE_MAX_MESSAGE_BYTES",
        "TASKSTORE_SHUTDOWN_GRACE",
    ] {
        assert!(text.contains(env), "serve --help lacks {env}");
    }
}

#[test]
fn bad_configuration_fails_at_startup_with_a_clear_message() {
    let output = Command::new(BIN)
        .args(["serve", "--default-ttl", "2d", "--max-ttl", "1d"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("default ttl exceeds the maximum"));
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the service did not exit"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts `taskstore dev` on `database`; returns it and its `listening` event.
fn start_dev(database: &str, command_tools: &std::path::Path) -> (Service, serde_json::Value) {
    let mut command = Command::new(BIN);
    command
        .args(["--log-format", "json", "dev", "--listen", "127.0.0.1:0"])
        .args(["--shutdown-grace", "5s", "--database-url", database])
        .args([
            "--command-tools",
            command_tools.to_str().expect("utf-8 path"),
        ])
        .env_remove("TASKSTORE_DATABASE_URL")
        .env_remove("TASKSTORE_AMQP_URL");
    launch(command)
}

fn stop(service: &mut Service) {
    let pid = service.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill")
            .success()
    );
    let status = wait_with_timeout(&mut service.child, Duration::from_secs(30));
    assert!(status.success(), "exit status {status:?}");
}

/// `taskstore dev`: the whole system in one process, with nothing installed
/// (no PostgreSQL, no RabbitMQ): the README's first command. Its SQLite file
/// keeps tasks and results across a restart.
#[tokio::test]
async fn dev_runs_tools_as_tasks_end_to_end_and_keeps_them_across_restarts() {
    let file = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("dev-{}.db", std::process::id()));
    let _ = std::fs::remove_file(&file);
    let database = format!("sqlite://{}", file.display());
    let tools = file.with_extension("tools.json");
    let shout = "import json, sys; print(json.load(sys.stdin)['text'].upper())";
    std::fs::write(
        &tools,
        serde_json::json!({"tools": {"shout": {"command": ["python3", "-c", shout]}}}).to_string(),
    )
    .expect("command tools file");
    let (mut service, listening) = start_dev(&database, &tools);
    assert_eq!(listening["backend"], "sqlite");
    assert_eq!(listening["queue"], "in-process");
    assert_eq!(listening["embedded_workers"], 2);
    assert!(
        listening["data"]
            .as_str()
            .is_some_and(|d| d.ends_with(".db")),
        "{listening}"
    );

    let created = json(&client(
        &service,
        &[
            "create",
            "--tool",
            "hash",
            "--arguments",
            r#"{"items":3000}"#,
            "--dispatch",
            "--json",
        ],
    ));
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    let watched = client(&service, &["watch", &id]);
    assert!(watched.status.success());
    let watched = String::from_utf8_lossy(&watched.stdout);
    assert!(
        watched
            .lines()
            .last()
            .is_some_and(|l| l.contains("completed")),
        "{watched}"
    );
    let result = json(&client(&service, &["result", &id, "--wait", "--json"]));
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.starts_with("sha256 chain of 3000 items"), "{text}");

    let failing = json(&client(
        &service,
        &[
            "create",
            "--tool",
            "fail",
            "--arguments",
            r#"{"message":"nope"}"#,
            "--dispatch",
            "--json",
        ],
    ));
    let failed = json(&client(
        &service,
        &[
            "result",
            failing["taskId"].as_str().expect("id"),
            "--wait",
            "--json",
        ],
    ));
    assert_eq!(failed["task"]["status"], "failed");
    assert_eq!(failed["task"]["statusMessage"], "nope");

    // A command tool from the config file, on the embedded workers.
    let shouted = json(&client(
        &service,
        &[
            "create",
            "--tool",
            "shout",
            "--arguments",
            r#"{"text":"hi"}"#,
            "--dispatch",
            "--json",
        ],
    ));
    let shouted = json(&client(
        &service,
        &[
            "result",
            shouted["taskId"].as_str().expect("id"),
            "--wait",
            "--json",
        ],
    ));
    assert_eq!(shouted["result"]["content"][0]["text"], "HI");
    stop(&mut service);

    // Restart on the same file: the result is still there.
    let (mut service, _) = start_dev(&database, &tools);
    let again = json(&client(&service, &["result", &id, "--json"]));
    assert_eq!(
        again["result"]["content"][0]["text"].as_str(),
        Some(text.as_str())
    );
    stop(&mut service);
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&tools);
}

/// CI's smoke of the load generator: every scenario runs briefly against
/// `taskstore dev` (in memory) and reports figures. Not a measurement.
#[tokio::test]
async fn bench_runs_every_scenario_and_reports() {
    let tools = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("no-tools-{}.json", std::process::id()));
    std::fs::write(&tools, r#"{"tools": {}}"#).expect("empty command tools file");
    let (mut service, _) = start_dev("memory:", &tools);
    for (scenario, operation) in [
        ("create", "create"),
        ("get", "get"),
        ("poll", "create_to_result"),
        ("e2e", "create_to_worker_start"),
        ("list", "list_page"),
        ("watch", "watch_delivery"),
    ] {
        let output = client(
            &service,
            &[
                "bench",
                "--scenario",
                scenario,
                "--clients",
                "2",
                "--duration",
                "1s",
                "--tasks",
                "50",
                "--poll-interval",
                "20ms",
            ],
        );
        assert!(
            output.status.success(),
            "{scenario}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("a JSON report");
        assert_eq!(report["scenario"], scenario);
        let figures = &report["operations"][operation];
        assert!(
            figures["count"].as_u64().is_some_and(|n| n > 0),
            "{scenario}: {report}"
        );
        assert!(
            figures["p99_ms"]
                .as_f64()
                .is_some_and(|p| p >= figures["p50_ms"].as_f64().unwrap_or(0.0))
        );
    }
    stop(&mut service);
    let _ = std::fs::remove_file(&tools);
}
