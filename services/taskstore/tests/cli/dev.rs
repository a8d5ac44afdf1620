//! `taskstore dev`: the whole system in one process, with nothing installed
//! (no PostgreSQL, no RabbitMQ), the README's first command; how it stops;
//! and what it says about tasks nobody can run.

use std::time::{Duration, Instant};

use crate::harness::{
    Service, client, eventually, run, scratch_file, start_dev, start_dev_at, wait_with_timeout,
    with_endpoint,
};

/// A command tools file with one Python tool, `shout`.
fn shout_tools() -> std::path::PathBuf {
    let tools = scratch_file("tools.json");
    let shout = "import json, sys; print(json.load(sys.stdin)['text'].upper())";
    std::fs::write(
        &tools,
        serde_json::json!({"tools": {"shout": {"command": ["python3", "-c", shout]}}}).to_string(),
    )
    .expect("command tools file");
    tools
}

fn dispatch(service: &Service, tool: &str, arguments: &str) -> String {
    let created = client(
        service,
        &[
            "create",
            "--tool",
            tool,
            "--arguments",
            arguments,
            "--dispatch",
            "--json",
        ],
    );
    created.json()["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned()
}

/// Its SQLite file keeps tasks and results across a restart.
#[tokio::test]
async fn dev_runs_tools_as_tasks_end_to_end_and_keeps_them_across_restarts() {
    let file = scratch_file("dev.db");
    let database = format!("sqlite://{}", file.display());
    let tools = shout_tools();
    let tools_flag = ["--command-tools", tools.to_str().expect("utf-8 path")];
    let (mut service, listening) = start_dev(&database, &tools_flag);
    assert_eq!(listening["backend"], "sqlite");
    assert_eq!(listening["queue"], "in-process");
    assert_eq!(listening["embedded_workers"], 2);
    assert!(
        listening["data"]
            .as_str()
            .is_some_and(|d| d.ends_with(".db")),
        "{listening}"
    );

    let id = dispatch(&service, "hash", r#"{"items":3000}"#);
    let watched = client(&service, &["watch", &id]);
    assert!(watched.status.success());
    assert!(
        watched
            .stdout
            .lines()
            .last()
            .is_some_and(|l| l.contains("completed")),
        "{}",
        watched.stdout
    );
    let result = client(&service, &["result", &id, "--wait", "--json"]).json();
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(text.starts_with("sha256 chain of 3000 items"), "{text}");

    let failing = dispatch(&service, "fail", r#"{"message":"nope"}"#);
    let failed = client(&service, &["result", &failing, "--wait", "--json"]);
    assert_eq!(failed.code(), 3, "a failed task: {}", failed.stderr);
    assert_eq!(failed.only_json()["task"]["status"], "failed");
    assert_eq!(failed.only_json()["task"]["statusMessage"], "nope");

    // A command tool from the config file, on the embedded workers.
    let shouted = dispatch(&service, "shout", r#"{"text":"hi"}"#);
    let shouted = client(&service, &["result", &shouted, "--wait", "--json"]).json();
    assert_eq!(shouted["result"]["content"][0]["text"], "HI");
    service.stop(Duration::from_secs(30));

    // Restart on the same file: the result is still there.
    let (mut service, _) = start_dev(&database, &tools_flag);
    let again = client(&service, &["result", &id, "--json"]).json();
    assert_eq!(
        again["result"]["content"][0]["text"].as_str(),
        Some(text.as_str())
    );
    service.stop(Duration::from_secs(30));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&tools);
}

/// Ctrl-C with a tool running and clients waiting: open streams end at once
/// with "the service is shutting down" (a `watch` says so once and follows
/// the task when the service is back), the running task is given back (it
/// runs after the next start), and `dev` exits within moments, without
/// warnings.
#[tokio::test]
async fn ctrl_c_stops_dev_at_once_and_the_running_task_runs_after_a_restart() {
    let file = scratch_file("dev.db");
    let database = format!("sqlite://{}", file.display());
    let (mut service, _) = start_dev(&database, &[]);
    let id = dispatch(&service, "sleep", r#"{"ms":3000}"#);
    assert!(
        eventually(Duration::from_secs(10), || {
            client(&service, &["get", &id, "--json"]).json()["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("running on"))
        }),
        "the sleep starts"
    );
    let spawn_client = |args: &[&str]| {
        std::process::Command::new(crate::harness::BIN)
            .args(with_endpoint(args, &service.endpoint))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("client")
    };
    let watch = spawn_client(&["watch", &id]);
    let waiting = spawn_client(&["result", &id, "--wait"]);
    std::thread::sleep(Duration::from_millis(500));

    let asked = Instant::now();
    service.signal("-INT");
    let status = wait_with_timeout(&mut service.child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert!(asked.elapsed() < Duration::from_secs(10));
    let output = waiting.wait_with_output().expect("result --wait ends");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(7), "{stderr}");
    assert_eq!(stderr.trim(), "error: the service is shutting down");
    let logs = service.drain_logs().to_vec();
    let warnings: Vec<&String> = logs
        .iter()
        .filter(|l| l.contains("\"WARN\"") || l.contains("\"ERROR\""))
        .collect();
    assert!(
        warnings.is_empty(),
        "a clean shutdown warns of nothing: {warnings:#?}"
    );
    for step in [
        "stopping the embedded workers first",
        "giving running tasks back now",
        "open streams end now",
        "stopping the background loops",
    ] {
        assert!(
            logs.iter().any(|l| l.contains(step)),
            "the log says {step:?}: {logs:#?}"
        );
    }

    let address = service.endpoint.trim_start_matches("http://").to_owned();
    let (mut service, _) = start_dev_at(&address, &database, &[]);
    let result = client(&service, &["result", &id, "--wait", "--json"]).json();
    let output = wait_with_output_timeout(watch, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr.trim(),
        format!(
            "warning: the service went away (the service is shutting down); \
             following task {id} again when it is back"
        ),
        "one warning for the outage"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.trim_end().ends_with("completed"),
        "the watch followed the task to its end: {stdout}"
    );
    assert_eq!(result["result"]["content"][0]["text"], "slept 3000 ms");
    service.stop(Duration::from_secs(30));
    // The task given back ran at once: its job was not offered before the
    // embedded workers consumed (and then held for lack of a worker).
    let held: Vec<&String> = service
        .drain_logs()
        .iter()
        .filter(|l| l.contains("no worker serves the tool"))
        .collect();
    assert!(held.is_empty(), "{held:#?}");
    let _ = std::fs::remove_file(&file);
}

/// `serve` keeps its grace period for running tasks; a second signal ends
/// the wait at once.
#[tokio::test]
async fn a_second_signal_exits_at_once() {
    let mut command = std::process::Command::new(crate::harness::BIN);
    command
        .args([
            "--log-format",
            "json",
            "serve",
            "--auth",
            "none",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--database-url", "memory:", "--amqp-url", "none"])
        .args(["--shutdown-grace", "60s"]);
    let (mut service, _) = crate::harness::launch(command);
    let id = dispatch(&service, "sleep", r#"{"ms":60000}"#);
    assert!(eventually(Duration::from_secs(10), || {
        client(&service, &["get", &id, "--json"]).json()["statusMessage"]
            .as_str()
            .is_some_and(|m| m.starts_with("running on"))
    }));
    service.signal("-INT");
    service.wait_for_log(Duration::from_secs(5), |e| {
        e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("worker stopping"))
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        service.child.try_wait().expect("wait").is_none(),
        "still in its grace period"
    );
    service.signal("-INT");
    let status = wait_with_timeout(&mut service.child, Duration::from_secs(5));
    assert_eq!(
        status.code(),
        Some(130),
        "exits at once on the second signal"
    );
}

/// A typo in a tool name does not wait in silence: the CLI warns (with a
/// guess), the task says what it waits for, and the service logs it once.
#[tokio::test]
async fn a_task_for_a_tool_nobody_serves_says_so() {
    let (mut service, _) = start_dev("memory:", &[]);
    let created = client(
        &service,
        &[
            "create",
            "--tool",
            "ehco",
            "--arguments",
            "{}",
            "--dispatch",
            "--json",
        ],
    );
    assert!(created.status.success(), "{}", created.stderr);
    assert_eq!(created.stderr.lines().count(), 1, "{}", created.stderr);
    assert!(
        created.stderr.starts_with(r#"warning: no worker has served tool "ehco" in the last 30s: the task waits until one does (served now: echo, fail, hash, noop, sleep; did you mean "echo"?)"#),
        "{}",
        created.stderr
    );
    let id = created.json()["taskId"].as_str().expect("id").to_owned();
    assert!(eventually(Duration::from_secs(10), || {
        client(&service, &["get", &id, "--json"]).json()["statusMessage"]
            == "waiting for a worker that serves tool ehco"
    }));
    let logged = service.wait_for_log(Duration::from_secs(10), |e| {
        e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("no worker serves the tool"))
    });
    assert_eq!(logged["task_id"], id.as_str());
    assert_eq!(logged["tool"], "ehco");

    let served = client(&service, &["create", "--tool", "echo", "--dispatch"]);
    assert!(
        served.stderr.is_empty(),
        "no warning for a served tool: {}",
        served.stderr
    );
    // The job is offered again every 5 s; the log line is not repeated.
    std::thread::sleep(Duration::from_secs(6));
    service.stop(Duration::from_secs(30));
    let logs = service.drain_logs();
    let held = logs
        .iter()
        .filter(|l| l.contains("no worker serves the tool"))
        .count();
    assert_eq!(held, 1, "logged once, not at every retry: {logs:#?}");
}

#[tokio::test]
async fn status_shows_the_service_its_dependencies_and_workers() {
    let (mut service, _) = start_dev("memory:", &["--embedded-workers", "2"]);
    let text = client(&service, &["status"]);
    assert_eq!(text.code(), 0, "{}", text.stderr);
    for line in [
        "database  ok",
        "queue     in-process: ok",
        "outbox    0 jobs waiting",
        "workers   2 reporting",
        "embedded-0",
        "echo,fail,hash,noop,sleep",
        "health    ok",
    ] {
        assert!(text.stdout.contains(line), "{line:?} in\n{}", text.stdout);
    }
    let json = client(&service, &["status", "--json"]).json();
    assert_eq!(json["healthy"], true);
    assert_eq!(json["backend"], "memory");
    assert_eq!(json["queue"]["kind"], "in-process");
    assert_eq!(json["workers"].as_array().map(Vec::len), Some(2));
    let echo = json["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == "echo"))
        .expect("echo is served");
    assert_eq!(echo["workers"], 2);
    assert_eq!(echo["slots"], 8);
    let served = client(
        &service,
        &["status", "--tool", "echo,sleep", "--wait", "10s"],
    );
    assert_eq!(served.code(), 0, "{}", served.stdout);
    let started = Instant::now();
    let missing = client(
        &service,
        &["status", "--tool", "echo", "--tool", "ehco", "--wait", "1s"],
    );
    assert_eq!(missing.code(), 8, "{}", missing.stdout);
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited");
    assert!(
        missing
            .stdout
            .contains("DEGRADED: no worker serves tool ehco"),
        "{}",
        missing.stdout
    );
    service.stop(Duration::from_secs(30));

    let unreachable = run(
        &with_endpoint(&["status", "--wait", "1s"], &service.endpoint),
        None,
        &[],
    );
    assert_eq!(unreachable.code(), 7, "{}", unreachable.stderr);
    assert!(
        unreachable
            .stderr
            .contains("cannot reach the taskstore service"),
        "{}",
        unreachable.stderr
    );
}

/// Jobs queued in the in-process queue behind busy workers when `dev`
/// stops are not lost: the queue lives in memory, so at start every
/// dispatched task that no worker holds and no job offers is offered again.
#[tokio::test]
async fn tasks_queued_behind_busy_workers_run_after_a_restart() {
    let file = scratch_file("queued.db");
    let database = format!("sqlite://{}", file.display());
    let one_slot = ["--embedded-workers", "1", "--worker-concurrency", "1"];
    let (mut service, _) = start_dev(&database, &one_slot);
    let ids: Vec<String> = (0..3)
        .map(|_| dispatch(&service, "sleep", r#"{"ms":1500}"#))
        .collect();
    assert!(
        eventually(Duration::from_secs(10), || {
            client(&service, &["get", &ids[0], "--json"]).json()["statusMessage"]
                .as_str()
                .is_some_and(|m| m.starts_with("running on"))
        }),
        "the first sleep starts; the others wait in the queue"
    );
    service.signal("-INT");
    let status = wait_with_timeout(&mut service.child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");

    let (mut service, _) = start_dev(&database, &one_slot);
    for id in &ids {
        let result = client(&service, &["result", id, "--wait", "--json"]).json();
        assert_eq!(
            result["result"]["content"][0]["text"], "slept 1500 ms",
            "{id}: {result}"
        );
    }
    service.stop(Duration::from_secs(30));
    let _ = std::fs::remove_file(&file);
}

/// `dev` prints what a person needs, not a line per RPC (issue 38): its
/// access lines are left out unless asked for.
#[tokio::test]
async fn dev_logs_no_line_per_rpc() {
    let (mut service, _) = start_dev("memory:", &[]);
    for _ in 0..3 {
        assert_eq!(client(&service, &["list"]).code(), 0);
    }
    let id = dispatch(&service, "echo", r#"{"text":"hi"}"#);
    assert_eq!(client(&service, &["result", &id, "--wait"]).code(), 0);
    let access: Vec<&String> = service
        .drain_logs()
        .iter()
        .filter(|line| line.contains(r#""message":"rpc""#))
        .collect();
    assert!(access.is_empty(), "{access:#?}");
    service.stop(Duration::from_secs(10));
}

/// `watch` follows its task through a restart of the service (a rolling
/// restart), showing each change once, instead of ending with UNAVAILABLE
/// (issue 38).
#[tokio::test]
async fn watch_follows_its_task_through_a_restart() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let file = std::env::temp_dir().join(format!("watch-restart-{port}.db"));
    let database = format!("sqlite://{}", file.to_str().expect("utf-8"));
    let listen = format!("127.0.0.1:{port}");
    let start = || {
        let mut command = std::process::Command::new(crate::harness::BIN);
        command
            .args(["--log-format", "json", "dev", "--listen", &listen])
            .args(["--mcp-listen", "off", "--dashboard-listen", "off"])
            .args(["--shutdown-grace", "5s", "--database-url", &database])
            .env_remove("TASKSTORE_DATABASE_URL")
            .env_remove("TASKSTORE_AMQP_URL");
        crate::harness::launch(command).0
    };
    let mut service = start();
    let id = dispatch(&service, "sleep", r#"{"ms":2500}"#);
    let watched = std::process::Command::new(crate::harness::BIN)
        .args(["watch", &id, "--endpoint", &service.endpoint])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("watch");
    std::thread::sleep(Duration::from_millis(800));
    service.stop(Duration::from_secs(15));
    let restarted = start();
    let watched = watched.wait_with_output().expect("watch ends");
    let (out, err) = (
        String::from_utf8_lossy(&watched.stdout),
        String::from_utf8_lossy(&watched.stderr),
    );
    assert_eq!(watched.status.code(), Some(0), "{out}\n{err}");
    assert!(out.contains("completed"), "{out}");
    assert!(err.contains("following task"), "{err}");
    drop(restarted);
    let _ = std::fs::remove_file(&file);
}

/// `child`'s output once it exits, within `timeout` (else the test fails).
fn wait_with_output_timeout(
    mut child: std::process::Child,
    timeout: Duration,
) -> std::process::Output {
    wait_with_timeout(&mut child, timeout);
    child.wait_with_output().expect("output of an exited child")
}
