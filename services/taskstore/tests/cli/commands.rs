//! Every client command against `taskstore serve` on PostgreSQL: output in
//! both forms, exit statuses, paging, filters, and what each mistake says.

use std::time::Duration;

use crate::harness::{
    Ran, Service, client, fresh_database_url, run, start_serve, start_service_with, with_endpoint,
};

/// `serve` without a broker or workers: these tests dispatch nothing.
pub(crate) async fn quiet_service() -> Service {
    start_service_with(&["--amqp-url", "none", "--embedded-workers", "0"]).await
}

pub(crate) fn create_echo(service: &Service, extra: &[&str]) -> Ran {
    let mut args = vec![
        "create",
        "--tool",
        "echo",
        "--arguments",
        r#"{"text":"hi"}"#,
    ];
    args.extend_from_slice(extra);
    client(service, &args)
}

pub(crate) fn task_id(ran: &Ran) -> String {
    ran.json()["taskId"].as_str().expect("taskId").to_owned()
}

#[tokio::test]
async fn serve_answers_every_client_command_and_stops_cleanly_on_sigterm() {
    let database = fresh_database_url().await;
    let mut service = start_serve(&database, &[]);

    let created = create_echo(&service, &["--json"]).json();
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttl"], 3_600_000, "the default ttl, in ms");
    assert_eq!(created["pollInterval"], 1000);
    assert_eq!(created["tool"], "echo");
    let id = created["taskId"].as_str().expect("taskId").to_owned();

    // A create with an idempotency key is safe to run again.
    let keyed = task_id(&create_echo(
        &service,
        &["--idempotency-key", "k1", "--json"],
    ));
    let again = task_id(&create_echo(
        &service,
        &["--idempotency-key", "k1", "--json"],
    ));
    assert_eq!(keyed, again);
    let reused = client(
        &service,
        &[
            "create",
            "--tool",
            "echo",
            "--arguments",
            "{}",
            "--idempotency-key",
            "k1",
        ],
    );
    assert!(
        !reused.status.success() && reused.stderr.contains("idempotency key"),
        "{}",
        reused.stderr
    );
    let empty = create_echo(&service, &["--idempotency-key", ""]);
    assert_eq!(empty.code(), 2, "a usage error: {}", empty.stderr);
    // A priority: 0 to 9.
    let urgent = create_echo(&service, &["--dispatch", "--priority", "9"]);
    assert!(urgent.status.success(), "{}", urgent.stderr);
    let too_high = create_echo(&service, &["--dispatch", "--priority", "10"]);
    assert_eq!(too_high.code(), 2, "a usage error: {}", too_high.stderr);

    let shown = client(&service, &["get", &id]);
    assert!(shown.status.success());
    assert!(
        shown.stdout.contains(&id) && shown.stdout.contains("working"),
        "{}",
        shown.stdout
    );

    let updated = client(
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
    )
    .json();
    assert_eq!(updated["status"], "input_required");
    assert_eq!(updated["statusMessage"], "which file?");

    let result = r#"{"content":[{"type":"text","text":"hi"}],"isError":false}"#;
    let done = client(&service, &["complete", &id, "--result", result, "--json"]).json();
    assert_eq!(done["status"], "completed");
    let fetched = client(&service, &["result", &id, "--json"]).json();
    assert_eq!(fetched["result"]["content"][0]["text"], "hi");
    assert_eq!(fetched["task"]["status"], "completed");

    let other = client(
        &service,
        &[
            "create",
            "--request",
            r#"{"method":"tools/call"}"#,
            "--task-id",
            "mine",
            "--json",
        ],
    )
    .json();
    assert_eq!(other["taskId"], "mine");
    let cancelled = client(&service, &["cancel", "mine", "--json"]).json();
    assert_eq!(cancelled["status"], "cancelled");
    let deleted = client(&service, &["delete", "mine", "--json"]).json();
    assert_eq!(
        deleted,
        serde_json::json!({"taskId": "mine", "deleted": true})
    );
    let gone = client(&service, &["get", "mine"]);
    assert_eq!(
        gone.code(),
        5,
        "a deleted task is not found: {}",
        gone.stderr
    );

    let listed = client(&service, &["list", "--all", "--page-size", "1", "--json"]).json();
    assert_eq!(listed["tasks"][0]["taskId"], id.as_str());
    assert!(listed.get("nextCursor").is_none(), "--all reads every page");

    let deleted = client(&service, &["cleanup", "--json"]).json();
    assert_eq!(deleted["deleted"], 0);

    service.stop(Duration::from_secs(20));
    let logs = service.drain_logs();
    assert!(
        logs.iter().any(|line| line.contains("\"stopped\"")),
        "{logs:?}"
    );

    // A restart migrates an up-to-date database: PostgreSQL's routine notice
    // ("relation _sqlx_migrations already exists, skipping") is not news.
    let mut again = start_serve(&database, &[]);
    again.stop(Duration::from_secs(20));
    let logs = again.drain_logs();
    assert!(
        !logs.iter().any(|line| line.contains("_sqlx_migrations")),
        "routine PostgreSQL notices stay out of the log: {logs:?}"
    );
}

#[tokio::test]
async fn result_and_watch_exit_with_the_tasks_outcome() {
    let service = quiet_service().await;
    let result = r#"{"content":[{"type":"text","text":"done"}]}"#;

    let completed = task_id(&create_echo(&service, &["--json"]));
    client(&service, &["complete", &completed, "--result", result]);
    assert_eq!(client(&service, &["result", &completed]).code(), 0);
    assert_eq!(client(&service, &["watch", &completed]).code(), 0);

    let failed = task_id(&create_echo(&service, &["--json"]));
    client(
        &service,
        &[
            "complete",
            &failed,
            "--result",
            result,
            "--failed",
            "--message",
            "broke",
        ],
    );
    let shown = client(&service, &["result", &failed, "--json"]);
    assert_eq!(shown.code(), 3, "{}", shown.stderr);
    assert_eq!(
        shown.only_json()["task"]["statusMessage"],
        "broke",
        "the result is still printed"
    );
    assert_eq!(client(&service, &["watch", &failed]).code(), 3);

    let cancelled = task_id(&create_echo(&service, &["--json"]));
    client(&service, &["cancel", &cancelled]);
    let shown = client(&service, &["result", &cancelled, "--json"]);
    assert_eq!(shown.code(), 4);
    assert_eq!(shown.only_json()["task"]["status"], "cancelled");
    assert_eq!(client(&service, &["watch", &cancelled]).code(), 4);

    let missing = client(&service, &["result", "nope"]);
    assert_eq!(missing.code(), 5);
    assert_eq!(
        missing.stderr.trim(),
        "error: task nope not found: it never existed, expired, or belongs to another session"
    );
    assert_eq!(client(&service, &["get", "nope"]).code(), 5);
    assert_eq!(client(&service, &["watch", "nope"]).code(), 5);

    let running = task_id(&create_echo(&service, &["--json"]));
    let not_ready = client(&service, &["result", &running]);
    assert_eq!(not_ready.code(), 6);
    assert!(
        not_ready
            .stderr
            .contains("is still working: its result is not ready (wait for it with --wait)"),
        "{}",
        not_ready.stderr
    );
    let timed_out = client(&service, &["result", &running, "--wait", "--timeout", "1s"]);
    assert_eq!(timed_out.code(), 6);
    assert_eq!(
        timed_out.stderr.trim(),
        format!("error: timed out after 1s waiting for task {running}: it is still working")
    );

    let help = run(&["result".to_owned(), "--help".to_owned()], None, &[]);
    for line in [
        "3  the task failed",
        "4  the task was cancelled",
        "5  no such task",
        "6  the task has not finished",
        "7  the service is unreachable",
    ] {
        assert!(
            help.stdout.contains(line),
            "--help documents {line:?}: {}",
            help.stdout
        );
    }
}

/// Each mistake gets one line on stderr saying what to do, with no colour
/// codes when stderr is not a terminal.
#[tokio::test]
async fn mistakes_get_one_clear_line_each() {
    let service = quiet_service().await;
    let check = |ran: Ran, code: i32, expected: &str| {
        assert_eq!(ran.code(), code, "{}", ran.stderr);
        assert_eq!(ran.stderr.lines().count(), 1, "one line: {:?}", ran.stderr);
        assert!(
            !ran.stderr.contains('\u{1b}'),
            "no colour codes off a terminal: {:?}",
            ran.stderr
        );
        assert!(ran.stderr.starts_with("error: "), "{:?}", ran.stderr);
        assert!(
            ran.stderr.contains(expected),
            "{expected:?} in {:?}",
            ran.stderr
        );
    };
    check(
        client(&service, &["create"]),
        2,
        "create needs --tool NAME (with --arguments JSON) or --request JSON, e.g. taskstore create --tool echo",
    );
    check(
        client(
            &service,
            &["create", "--tool", "echo", "--arguments", "{text: hi}"],
        ),
        2,
        r#"--arguments must be JSON (key must be a string at line 1 column 2), e.g. --arguments '{"text":"hi"}', or @FILE, or - for standard input"#,
    );
    check(
        client(
            &service,
            &["create", "--tool", "echo", "--request-id", "abc"],
        ),
        2,
        r#"--request-id "abc" must be JSON: a number such as 7, or a string such as '"abc"'"#,
    );
    check(
        client(
            &service,
            &["create", "--tool", "echo", "--ttl", "unlimited"],
        ),
        2,
        "--ttl unlimited: a task that never expires cannot be requested",
    );
    check(
        client(&service, &["create", "--tool", "echo", "--ttl", "soon"]),
        2,
        "give a duration such as 30m, 2h or 7d",
    );
    let first = create_echo(&service, &["--task-id", "dup"]);
    assert!(first.status.success(), "{}", first.stderr);
    check(
        create_echo(&service, &["--task-id", "dup"]),
        1,
        "task dup already exists: choose another --task-id, or leave it out for a generated id",
    );
    check(
        client(&service, &["list", "--session", &"s".repeat(300)]),
        2,
        "session_id is larger than the limit of 256 bytes",
    );
    check(
        client(&service, &["complete", "dup", "--result", "[1]"]),
        2,
        "--result must be a JSON object, not an array",
    );
    check(
        client(&service, &["get", "has space"]),
        2,
        "task id \"has space\" must be 1 to 128 printable ASCII characters",
    );

    // Where the service is not.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let refused = run(
        &with_endpoint(&["get", "x"], &format!("http://127.0.0.1:{port}")),
        None,
        &[],
    );
    check(
        refused,
        7,
        &format!(
            "cannot reach the taskstore service at http://127.0.0.1:{port}: Connection refused \
             (os error 111); is the service running there? (start one with `taskstore dev`"
        ),
    );
    let wrong_scheme = run(
        &with_endpoint(&["get", "x"], "grpc://127.0.0.1:1"),
        None,
        &[],
    );
    check(wrong_scheme, 2, "write it as http://HOST:PORT");
    // A bare HOST:PORT (as grpcurl takes it) works.
    let bare = service.endpoint.trim_start_matches("http://").to_owned();
    let ok = run(&with_endpoint(&["list"], &bare), None, &[]);
    assert!(ok.status.success(), "{}", ok.stderr);
}

#[tokio::test]
async fn colour_only_on_a_terminal_and_never_with_no_color() {
    let service = quiet_service().await;
    // `script` runs the command on a pseudo-terminal.
    let on_terminal = |no_color: bool| {
        let command = format!(
            "{} get nope --endpoint {}",
            crate::harness::BIN,
            service.endpoint
        );
        let mut script = std::process::Command::new("script");
        script
            .args(["-qec", &command, "/dev/null"])
            .env_remove("NO_COLOR");
        if no_color {
            script.env("NO_COLOR", "1");
        }
        let output = script.output().expect("script runs");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let coloured = on_terminal(false);
    assert!(
        coloured.contains("\u{1b}[1;31merror:\u{1b}[0m task nope not found"),
        "{coloured:?}"
    );
    let plain = on_terminal(true);
    assert!(!plain.contains('\u{1b}'), "{plain:?}");
    assert!(plain.contains("error: task nope not found"), "{plain:?}");
}

/// `--arguments`, `--request` and `--result` read files (`@path`) and
/// standard input (`-`), beyond the operating system's 128 KiB per argument.
#[tokio::test]
async fn json_flags_read_files_and_standard_input() {
    let service = quiet_service().await;
    let big = "x".repeat(200 * 1024);
    let file = crate::harness::scratch_file("arguments.json");
    std::fs::write(&file, serde_json::json!({ "text": big }).to_string()).expect("write");
    let from_file = format!("@{}", file.display());
    let created = client(
        &service,
        &[
            "create",
            "--tool",
            "echo",
            "--arguments",
            &from_file,
            "--json",
        ],
    );
    let id = task_id(&created);

    let result = serde_json::json!({"content": [{"type": "text", "text": big}]}).to_string();
    let completed = run(
        &with_endpoint(
            &["complete", &id, "--result", "-", "--json"],
            &service.endpoint,
        ),
        Some(&result),
        &[],
    );
    assert_eq!(completed.json()["status"], "completed");
    let fetched = client(&service, &["result", &id, "--json"]).json();
    assert_eq!(
        fetched["result"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(big.len())
    );

    let request = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo"}}"#;
    let from_stdin = run(
        &with_endpoint(&["create", "--request", "-", "--json"], &service.endpoint),
        Some(request),
        &[],
    );
    assert_eq!(from_stdin.json()["tool"], "echo");
    let missing = client(
        &service,
        &["create", "--tool", "echo", "--arguments", "@/no/such/file"],
    );
    assert_eq!(missing.code(), 2);
    assert!(
        missing
            .stderr
            .contains("cannot read --arguments from /no/such/file"),
        "{}",
        missing.stderr
    );
    let _ = std::fs::remove_file(&file);
}

/// Every `--json` output is one compact document per line, with MCP's
/// field names; `watch --json` streams the objects `get --json` prints.
#[tokio::test]
async fn json_output_has_one_style() {
    let service = quiet_service().await;
    let created = create_echo(&service, &["--json"]);
    let id = task_id(&created);
    let got = client(&service, &["get", &id, "--json"]).json();
    assert_eq!(created.json(), got);
    for key in [
        "taskId",
        "status",
        "createdAt",
        "lastUpdatedAt",
        "ttl",
        "pollInterval",
    ] {
        assert!(got.get(key).is_some(), "{key} in {got}");
    }
    client(&service, &["complete", &id, "--result", "{}"]);
    let watched = client(&service, &["watch", &id, "--json"]);
    let events: Vec<serde_json::Value> = watched
        .stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("one document per line"))
        .collect();
    assert_eq!(
        events.last().map(|e| e["status"].clone()),
        Some("completed".into())
    );
    assert_eq!(
        events
            .last()
            .map(|e| e.as_object().map(|o| o.keys().cloned().collect::<Vec<_>>())),
        Some(got.as_object().map(|o| o.keys().cloned().collect())),
        "the same object shape"
    );
    client(&service, &["result", &id, "--json"]).json();
    client(&service, &["list", "--json"]).json();
}
