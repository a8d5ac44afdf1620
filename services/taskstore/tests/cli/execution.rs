//! `taskstore get` says how a dispatched task is being run: its attempt and
//! who holds its lease (GetTaskExecution), as the dashboard's task page does.

use std::time::Duration;

use crate::harness::{client, eventually, scratch_file, start_dev};

#[test]
fn get_shows_the_attempt_and_the_worker_holding_it() {
    let file = scratch_file("execution.db");
    let (mut service, _) = start_dev(&format!("sqlite://{}", file.display()), &[]);
    let created = client(
        &service,
        &[
            "create",
            "--tool",
            "sleep",
            "--arguments",
            r#"{"ms":60000}"#,
            "--dispatch",
            "--max-attempts",
            "2",
            "--json",
        ],
    )
    .json();
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    assert!(
        eventually(Duration::from_secs(10), || {
            client(&service, &["get", &id, "--json"]).json()["execution"]["leaseExpiresAt"]
                .is_string()
        }),
        "a worker holds the task"
    );
    let running = client(&service, &["get", &id, "--json"]).json();
    let execution = &running["execution"];
    assert_eq!(execution["attempt"], 1, "{running}");
    assert_eq!(execution["maxAttempts"], 2, "{running}");
    let holder = execution["worker"].as_str().expect("worker");
    assert!(
        holder.starts_with("embedded-"),
        "dev's own workers: {running}"
    );

    let text = client(&service, &["get", &id]).stdout;
    assert!(text.contains("attempt         1 of 2"), "{text}");
    assert!(
        text.contains(&format!("worker          {holder}, lease until ")),
        "{text}"
    );

    // Once ended, the worker that ran it is the last one; no lease runs.
    client(&service, &["cancel", &id]);
    let done = client(&service, &["get", &id, "--json"]).json();
    assert_eq!(done["execution"]["attempt"], 1, "{done}");
    assert_eq!(done["execution"]["worker"], holder, "{done}");
    assert!(done["execution"]["leaseExpiresAt"].is_null(), "{done}");
    let text = client(&service, &["get", &id]).stdout;
    assert!(
        text.contains(&format!("worker          {holder} (last)")),
        "{text}"
    );

    // A task no worker runs has no execution to show.
    let own = client(
        &service,
        &[
            "create",
            "--tool",
            "echo",
            "--arguments",
            r#"{"text":"hi"}"#,
            "--json",
        ],
    )
    .json();
    let own_id = own["taskId"].as_str().expect("taskId");
    let plain = client(&service, &["get", own_id, "--json"]).json();
    assert!(plain.get("execution").is_none(), "{plain}");
    assert!(
        !client(&service, &["get", own_id])
            .stdout
            .contains("attempt")
    );

    service.stop(Duration::from_secs(30));
    let _ = std::fs::remove_file(&file);
}
