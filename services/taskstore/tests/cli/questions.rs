//! A task that asks, from the CLI: `get` and `watch` show its question and
//! how to answer it, `answer` answers it (and refuses a key it does not
//! ask), and the task goes on with the answer.

use std::time::Duration;

use crate::harness::{client, eventually, start_dev};

#[tokio::test]
async fn the_cli_shows_a_question_and_answers_it() {
    let (mut service, _) = start_dev("memory:", &[]);
    let created = client(
        &service,
        &[
            "create",
            "--tool",
            "sleep",
            "--arguments",
            r#"{"ms":10,"ask":"Proceed?"}"#,
            "--dispatch",
            "--json",
        ],
    )
    .json();
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    assert!(
        eventually(Duration::from_secs(10), || {
            client(&service, &["get", &id, "--json"]).json()["status"] == "input_required"
        }),
        "the task asks"
    );
    let shown = client(&service, &["get", &id, "--json"]).json();
    assert_eq!(shown["statusMessage"], "Proceed?");
    assert_eq!(
        shown["inputRequests"]["ask"]["method"], "elicitation/create",
        "{shown}"
    );
    let text = client(&service, &["get", &id]);
    assert!(
        text.stdout.contains("asks ask") && text.stdout.contains("taskstore answer"),
        "{}",
        text.stdout
    );
    let watched = std::process::Command::new(crate::harness::BIN)
        .args(["watch", &id, "--endpoint", &service.endpoint])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("watch");

    let unknown = client(&service, &["answer", &id, "nope", "--accept"]);
    assert_eq!(unknown.code(), 1, "{}", unknown.stderr);
    assert!(
        unknown.stderr.contains("no open question nope") && unknown.stderr.contains("it asks ask"),
        "{}",
        unknown.stderr
    );
    let bad = client(&service, &["answer", &id, "ask", "[1]"]);
    assert_eq!(bad.code(), 2, "{}", bad.stderr);
    // Content the question's schema does not ask for is refused, naming
    // the field, and the question stays open.
    let unasked = client(
        &service,
        &["answer", &id, "ask", "--accept", r#"{"extra":[1,2,3]}"#],
    );
    assert_ne!(unasked.code(), 0, "{}", unasked.stderr);
    assert!(
        unasked.stderr.contains("content.extra"),
        "{}",
        unasked.stderr
    );
    assert_eq!(
        client(&service, &["get", &id, "--json"]).json()["status"],
        "input_required"
    );
    let answered = client(&service, &["answer", &id, "ask", "--accept"]);
    assert_eq!(answered.code(), 0, "{}", answered.stderr);
    let result = client(&service, &["result", &id, "--wait", "--json"]).json();
    assert_eq!(result["result"]["content"][0]["text"], "slept 10 ms");
    let watched = watched.wait_with_output().expect("watch ends");
    let lines = String::from_utf8_lossy(&watched.stdout);
    assert!(
        lines.contains("asks ask"),
        "watch shows the question: {lines}"
    );
    assert_eq!(watched.status.code(), Some(0), "{lines}");
    let again = client(&service, &["answer", &id, "ask", "--decline"]);
    assert_ne!(again.code(), 0, "the task ended: {}", again.stderr);
    service.stop(Duration::from_secs(10));
}
