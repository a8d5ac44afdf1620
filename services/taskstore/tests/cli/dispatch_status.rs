//! `taskstore status`'s dispatch section and `taskstore lift-pause`, as an
//! operator reads and uses them: a task's upstream says "wait" (its worker
//! backs the tool off, through the worker API), `status` names the paused
//! key and its end, `lift-pause` ends the pause and says so (and says when
//! there was none), and `status` then shows the pause gone.

use std::time::Duration;

use taskstore::domain::{ReleaseReason, TaskId, TenantId};
use taskstore::store::execution::ExecutionStore;

use crate::commands::{create_echo, quiet_service, task_id};
use crate::harness::client;

#[tokio::test]
async fn status_shows_a_paused_key_and_lift_pause_ends_it() {
    let service = quiet_service().await;
    let id = task_id(&create_echo(&service, &["--dispatch", "--json"]));
    let channel = tonic::transport::Endpoint::from_shared(service.endpoint.clone())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let worker = taskstore::grpc::GrpcExecutionStore::new(channel);
    let tenant = TenantId::default_tenant();
    let task = TaskId::parse(&id).expect("id");
    let claim = worker
        .claim(&tenant, &task, 1, "w-cli")
        .await
        .expect("claim");
    worker
        .release(
            &tenant,
            &task,
            &claim.lease_token,
            ReleaseReason::BackOff {
                wait: Duration::from_secs(600),
            },
            "429 from upstream",
        )
        .await
        .expect("back off");

    let status = client(&service, &["status"]);
    // 8: degraded, as no worker serves echo here.
    assert!([0, 8].contains(&status.code()), "{}", status.stderr);
    assert!(
        status.stdout.contains("dispatch  held back by tool"),
        "{}",
        status.stdout
    );
    let paused_line = status
        .stdout
        .lines()
        .find(|line| line.contains("(whole tool)"))
        .unwrap_or_else(|| panic!("no paused key in {}", status.stdout));
    let ends_on = (chrono::Utc::now() + chrono::TimeDelta::seconds(600)).format("%Y-%m-%dT");
    assert!(
        paused_line.contains(&ends_on.to_string()),
        "the pause's end, 10 minutes from now: {paused_line}"
    );
    let json = client(&service, &["status", "--json"]).only_json();
    let keys = &json["dispatch"][0]["keys"];
    assert_eq!(json["dispatch"][0]["tool"], "echo", "{json}");
    assert_eq!(keys[0]["key"], "", "{json}");
    assert!(keys[0]["pausedUntil"].is_string(), "{json}");

    let lifted = client(&service, &["lift-pause", "--tool", "echo", "--key", ""]);
    assert_eq!(lifted.code(), 0, "{}", lifted.stderr);
    assert_eq!(lifted.stdout.trim(), "lifted: echo (whole tool) runs again");
    let again = client(&service, &["lift-pause", "--tool", "echo", "--key", ""]);
    assert_eq!(again.stdout.trim(), "echo (whole tool) was not paused");
    let json = client(
        &service,
        &["lift-pause", "--tool", "echo", "--key", "", "--json"],
    )
    .only_json();
    assert_eq!(json["lifted"], false);
    let status = client(&service, &["status"]);
    assert!(
        !status.stdout.contains("(whole tool)"),
        "the pause is gone: {}",
        status.stdout
    );
}
