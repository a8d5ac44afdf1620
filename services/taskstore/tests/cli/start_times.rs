//! A task created to start later keeps its start time across a restart of
//! the service, on SQLite (`dev`) and on PostgreSQL (`serve`): it runs once
//! its time has come, not before, and not a restart early.

use std::time::Duration;

use crate::commands::create_echo;
use crate::harness::{Service, client, fresh_database_url, scratch_file, start_dev, start_serve};

fn delayed_task_runs_at_its_time_across_a_restart(start: impl Fn() -> Service) {
    let mut service = start();
    let created = create_echo(&service, &["--dispatch", "--start-after", "4s", "--json"]).json();
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    let message = created["statusMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with("starts at "), "{created}");
    service.stop(Duration::from_secs(30));

    let mut service = start();
    let waiting = client(&service, &["get", &id, "--json"]).json();
    assert_eq!(waiting["statusMessage"].as_str(), Some(message));
    let done = client(&service, &["result", &id, "--wait", "--json"]).json();
    assert_eq!(done["result"]["content"][0]["text"], "hi");
    let at = |value: &serde_json::Value| {
        chrono::DateTime::parse_from_rfc3339(value.as_str().expect("a time")).expect("rfc 3339")
    };
    let ran_after = at(&done["task"]["lastUpdatedAt"]) - at(&created["createdAt"]);
    // Not before its time; the bound after it is generous: the relay looks
    // every second, and this machine may be busy with other tests.
    assert!(
        ran_after >= chrono::TimeDelta::seconds(4) && ran_after < chrono::TimeDelta::seconds(10),
        "ran {ran_after} after its creation"
    );
    service.stop(Duration::from_secs(30));
}

#[test]
fn a_delayed_task_starts_at_its_time_across_a_restart_of_dev() {
    let file = scratch_file("delayed.db");
    let database = format!("sqlite://{}", file.display());
    delayed_task_runs_at_its_time_across_a_restart(|| start_dev(&database, &[]).0);
    let _ = std::fs::remove_file(&file);
}

#[tokio::test]
async fn a_delayed_task_starts_at_its_time_across_a_restart_of_serve() {
    let database = fresh_database_url().await;
    // Its own workers on an in-process queue: the job waits in PostgreSQL's
    // outbox, which is what the restart must not lose.
    let flags = ["--amqp-url", "none", "--embedded-workers", "1"];
    delayed_task_runs_at_its_time_across_a_restart(|| start_serve(&database, &flags));
}
