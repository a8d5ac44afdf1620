//! What an operator meets: startup mistakes and their messages, a broker
//! outage, `--help`, and shell completions.

use std::process::Command;
use std::time::Duration;

use crate::harness::{BIN, client, fresh_database_url, launch, run, start_serve};

/// The first log event a `serve` that cannot start writes, and its status.
fn failed_start(args: &[&str]) -> (std::process::ExitStatus, String) {
    let output = Command::new(BIN)
        .args(["--log-format", "json", "serve", "--auth", "none"])
        .args(args)
        .output()
        .expect("run serve");
    (
        output.status,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn bad_configuration_fails_at_startup_with_a_clear_message() {
    let output = Command::new(BIN)
        .args([
            "serve",
            "--auth",
            "none",
            "--default-ttl",
            "2d",
            "--max-ttl",
            "1d",
        ])
        .output()
        .expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("default ttl exceeds the maximum"));
}

#[tokio::test]
async fn a_port_in_use_and_an_unknown_host_are_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let address = taken.local_addr().expect("addr").to_string();
    let database = fresh_database_url().await;
    let (status, logs) = failed_start(&[
        "--listen",
        &address,
        "--database-url",
        &database,
        "--amqp-url",
        "none",
    ]);
    assert!(!status.success());
    assert!(
        logs.contains(&format!(
            "could not listen on {address}: Address already in use"
        )),
        "{logs}"
    );
    assert!(
        logs.contains("choose another address with --listen"),
        "{logs}"
    );

    let (status, logs) = failed_start(&[
        "--listen",
        "no-such-host.invalid:50051",
        "--database-url",
        "memory:",
        "--amqp-url",
        "none",
    ]);
    assert!(!status.success());
    assert!(
        logs.contains("cannot resolve --listen no-such-host.invalid:50051"),
        "{logs}"
    );

    let refused = Command::new(BIN)
        .args(["serve", "--auth", "none", "--listen", "localhost"])
        .output()
        .expect("run");
    assert_eq!(refused.status.code(), Some(2), "a usage error");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("has no port; write it as HOST:PORT")
    );
}

#[test]
fn a_host_name_is_resolved_for_listening() {
    let mut command = Command::new(BIN);
    command
        .args([
            "--log-format",
            "json",
            "serve",
            "--auth",
            "none",
            "--listen",
            "localhost:0",
        ])
        .args(["--database-url", "memory:", "--amqp-url", "none"]);
    let (mut service, listening) = launch(command);
    let addr: std::net::SocketAddr = listening["addr"]
        .as_str()
        .expect("addr")
        .parse()
        .expect("an address");
    assert!(addr.ip().is_loopback(), "{addr}");
    assert!(client(&service, &["list"]).status.success());
    service.stop(Duration::from_secs(30));
}

#[test]
fn an_unreachable_database_is_named_with_its_cause() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let url = format!("postgres://postgres@127.0.0.1:{port}/nowhere");
    let output = Command::new(BIN)
        .args(["--log-format", "json", "migrate", "--database-url", &url])
        .output()
        .expect("run migrate");
    assert!(!output.status.success());
    let logs = String::from_utf8_lossy(&output.stderr);
    assert!(
        logs.contains(&format!(
            "PostgreSQL at 127.0.0.1:{port} (database nowhere) is unreachable"
        )),
        "{logs}"
    );
    assert!(
        logs.contains("Connection refused"),
        "the cause, not a pool timeout: {logs}"
    );
}

/// With the broker unreachable, `serve` keeps accepting tasks (their jobs
/// wait in the outbox), logs the outage once, and `status` shows it.
#[tokio::test]
async fn a_broker_outage_is_logged_once_and_shown_by_status() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let database = fresh_database_url().await;
    let amqp = format!("amqp://guest:guest@127.0.0.1:{port}/%2f");
    let mut service = start_serve(&database, &["--amqp-url", &amqp]);
    let created = client(
        &service,
        &["create", "--tool", "echo", "--dispatch", "--json"],
    );
    assert!(
        created.status.success(),
        "tasks are accepted: {}",
        created.stderr
    );

    let outage = service.wait_for_log(Duration::from_secs(10), |e| {
        e["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("job queue unreachable"))
    });
    assert_eq!(outage["level"], "WARN");
    let status = client(&service, &["status"]);
    assert_eq!(
        status.code(),
        8,
        "degraded: {}\n{}",
        status.stdout,
        status.stderr
    );
    assert!(
        status.stdout.contains("queue     rabbitmq: DOWN for"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("outbox    1 jobs waiting"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("health    DEGRADED: the job queue is unreachable"),
        "{}",
        status.stdout
    );
    let json = client(&service, &["status", "--json"]).only_json();
    assert_eq!(json["healthy"], false);
    assert_eq!(json["queue"]["state"]["healthy"], false);

    // Several reconnection attempts later, still one line.
    std::thread::sleep(Duration::from_secs(2));
    service.stop(Duration::from_secs(30));
    let logs = service.drain_logs();
    let lines = logs
        .iter()
        .filter(|l| l.contains("job queue unreachable"))
        .count();
    assert_eq!(lines, 1, "{logs:#?}");
}

#[test]
fn help_documents_every_flag_its_environment_variable_and_plain_defaults() {
    let help = run(&["serve".to_owned(), "--help".to_owned()], None, &[]).stdout;
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
        assert!(help.contains(env), "serve --help lacks {env}");
    }
    for url in [
        "postgres://postgres@127.0.0.1:5432/postgres",
        "amqp://guest:guest@127.0.0.1:5672/%2f",
    ] {
        assert!(help.contains(url), "{url} unbroken in:\n{help}");
    }
    let dev = run(&["dev".to_owned(), "--help".to_owned()], None, &[]).stdout;
    assert!(dev.contains("sqlite://taskstore-dev.db"), "{dev}");
}

#[test]
fn the_readme_configuration_table_lists_every_serve_flag() {
    let readme = include_str!("../../../../README.md");
    let help = run(&["serve".to_owned(), "--help".to_owned()], None, &[]).stdout;
    // The flags are where help entries start: `  --flag <VALUE>`.
    let flags: Vec<&str> = help
        .lines()
        .filter_map(|line| {
            line.trim_start()
                .strip_prefix("-h, ")
                .or(Some(line.trim_start()))
        })
        .filter(|line| line.starts_with("--"))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|flag| !["--help", "--version"].contains(flag))
        .collect();
    assert!(flags.contains(&"--metrics-listen"), "{help}");
    for flag in flags {
        let env = format!(
            "TASKSTORE_{}",
            flag.trim_start_matches("--")
                .replace('-', "_")
                .to_uppercase()
        );
        let documented = readme.contains(&format!("| `{flag}` |"));
        assert!(documented, "the README's configuration table lacks {flag}");
        // `--log-level` reads TASKSTORE_LOG; every other flag its own name.
        if flag != "--log-level" {
            assert!(readme.contains(&env), "the README does not name {env}");
        }
    }
}

#[test]
fn shell_completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_taskstore()"),
        ("zsh", "#compdef taskstore"),
        ("fish", "complete -c taskstore"),
    ] {
        let script = run(&["completions".to_owned(), shell.to_owned()], None, &[]);
        assert!(script.status.success(), "{shell}: {}", script.stderr);
        assert!(script.stdout.contains(marker), "{shell}");
        assert!(
            script.stdout.contains("create"),
            "{shell} completes the commands"
        );
    }
    let bash = run(&["completions".to_owned(), "bash".to_owned()], None, &[]).stdout;
    let file = crate::harness::scratch_file("completion.bash");
    std::fs::write(&file, bash).expect("write");
    let syntax = Command::new("bash")
        .arg("-n")
        .arg(&file)
        .status()
        .expect("bash -n");
    assert!(syntax.success(), "the bash script parses");
    let _ = std::fs::remove_file(file);
}
