//! Credentials and roles: no credentials, forged or revoked keys get
//! UNAUTHENTICATED (and the same words) on every RPC; a role without a
//! right gets PERMISSION_DENIED; health and reflection stay open.

use std::time::Duration;

use taskstore::auth::api_keys::REVOCATION_DELAY;
use taskstore::domain::Role;
use tonic::{Code, Status};

use super::*;

/// Every RPC of the three services, with harmless arguments.
async fn every_rpc(who: &mut Identity) -> Vec<(&'static str, Result<(), Status>)> {
    let id = || "some-task".to_owned();
    vec![
        (
            "CreateTask",
            who.store
                .create_task(create(None, None, false))
                .await
                .map(|_| ()),
        ),
        (
            "GetTask",
            who.store
                .get_task(pb::GetTaskRequest {
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "GetTaskExecution",
            who.store
                .get_task_execution(pb::GetTaskRequest {
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "UpdateTaskStatus",
            who.store
                .update_task_status(pb::UpdateTaskStatusRequest {
                    task_id: id(),
                    status: pb::TaskStatus::Working.into(),
                    status_message: None,
                    session_id: None,
                    lease_token: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "StoreTaskResult",
            who.store
                .store_task_result(pb::StoreTaskResultRequest {
                    task_id: id(),
                    status: pb::TaskStatus::Completed.into(),
                    result_json: "{}".into(),
                    session_id: None,
                    status_message: None,
                    lease_token: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "GetTaskResult",
            who.store
                .get_task_result(pb::GetTaskResultRequest {
                    task_id: id(),
                    session_id: None,
                    wait: false,
                })
                .await
                .map(|_| ()),
        ),
        (
            "ListTasks",
            who.store
                .list_tasks(pb::ListTasksRequest {
                    cursor: None,
                    page_size: None,
                    session_id: None,
                    statuses: Vec::new(),
                    tool: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "WatchTask",
            who.store
                .watch_task(pb::WatchTaskRequest {
                    lease_token: None,
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "HoldTask",
            who.store
                .hold_task(pb::HoldTaskRequest {
                    task_id: id(),
                    session_id: None,
                    holder: "roles".into(),
                    lease_token: String::new(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "WatchTasks",
            who.store
                .watch_tasks(pb::WatchTasksRequest { session_id: None })
                .await
                .map(|_| ()),
        ),
        (
            "CancelTask",
            who.store
                .cancel_task(pb::CancelTaskRequest {
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "DeleteTask",
            who.store
                .delete_task(pb::DeleteTaskRequest {
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "CleanupExpired",
            who.store
                .cleanup_expired(pb::CleanupExpiredRequest {})
                .await
                .map(|_| ()),
        ),
        (
            "ListTools",
            who.store
                .list_tools(pb::ListToolsRequest {})
                .await
                .map(|_| ()),
        ),
        (
            "ClaimTask",
            who.execution
                .claim_task(pb::ClaimTaskRequest {
                    task_id: id(),
                    generation: 1,
                    worker_id: "w".into(),
                    tenant_id: String::new(),
                    ..Default::default()
                })
                .await
                .map(|_| ()),
        ),
        (
            "RenewLease",
            who.execution
                .renew_lease(pb::RenewLeaseRequest {
                    task_id: id(),
                    lease_token: "x".into(),
                    tenant_id: String::new(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "ReleaseTask",
            who.execution
                .release_task(pb::ReleaseTaskRequest {
                    back_off_until: None,
                    task_id: id(),
                    lease_token: "x".into(),
                    reason: pb::ReleaseReason::Shutdown.into(),
                    message: String::new(),
                    tenant_id: String::new(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "AskQuestion",
            who.execution
                .ask_question(pb::AskQuestionRequest {
                    task_id: id(),
                    lease_token: "x".into(),
                    tenant_id: String::new(),
                    key: "k".into(),
                    request_json: r#"{"method":"roots/list"}"#.into(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "ListInputRequests",
            who.store
                .list_input_requests(pb::ListInputRequestsRequest {
                    task_id: id(),
                    session_id: None,
                })
                .await
                .map(|_| ()),
        ),
        (
            "AnswerInputRequests",
            who.store
                .answer_input_requests(pb::AnswerInputRequestsRequest {
                    task_id: id(),
                    session_id: None,
                    answers_json: [("k".to_owned(), "{}".to_owned())].into(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "Heartbeat",
            who.execution
                .heartbeat(pb::HeartbeatRequest {
                    consuming: None,
                    worker_id: "w".into(),
                    tools: vec!["echo".into()],
                    slots: 1,
                    busy: 0,
                    stopping: false,
                    descriptions: Vec::new(),
                })
                .await
                .map(|_| ()),
        ),
        (
            "GetStatus",
            who.operations
                .get_status(pb::GetStatusRequest {})
                .await
                .map(|_| ()),
        ),
        (
            "LiftPause",
            who.operations
                .lift_pause(pb::LiftPauseRequest {
                    tool: "echo".into(),
                    key: String::new(),
                })
                .await
                .map(|_| ()),
        ),
    ]
}

fn assert_refused_as_unauthenticated(who: &str, outcomes: &[(&str, Result<(), Status>)]) {
    for (rpc, outcome) in outcomes {
        let status = outcome.as_ref().expect_err("refused");
        assert_eq!(
            (status.code(), status.message()),
            (Code::Unauthenticated, "missing or invalid credentials"),
            "{who}: {rpc}"
        );
    }
}

async fn bad_credentials_are_unauthenticated_everywhere_but_health(kind: Kind) {
    let world = World::new(kind).await;
    let revoked = world.key("acme", Role::Admin).await;
    let revoked_id = revoked.split('_').nth(1).expect("key id").to_owned();
    let mut forged = world.key("acme", Role::Admin).await;
    forged.replace_range(forged.len() - 4.., "AAAA");

    let mut nobody = world.identity(None).await;
    assert_refused_as_unauthenticated("no credentials", &every_rpc(&mut nobody).await);
    let mut forger = world.identity(Some(&forged)).await;
    assert_refused_as_unauthenticated("a forged key", &every_rpc(&mut forger).await);
    let mut stranger = world.identity(Some("not-a-key-at-all")).await;
    assert_refused_as_unauthenticated("a stranger's token", &every_rpc(&mut stranger).await);

    let mut holder = world.identity(Some(&revoked)).await;
    holder
        .operations
        .get_status(pb::GetStatusRequest {})
        .await
        .expect_err("a tenant admin has no global status");
    holder
        .store
        .list_tasks(pb::ListTasksRequest {
            cursor: None,
            page_size: None,
            session_id: None,
            statuses: Vec::new(),
            tool: None,
        })
        .await
        .expect("the key works before it is revoked");
    assert!(world.keys.revoke_key(&revoked_id).await.expect("revoke"));
    tokio::time::sleep(REVOCATION_DELAY + Duration::from_millis(300)).await;
    assert_refused_as_unauthenticated("a revoked key", &every_rpc(&mut holder).await);

    // Probes and reflection need no credentials.
    let channel = common::grpc_channel(world.addr).await;
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: "mcp.tasks.v1.TaskStore".into(),
        })
        .await
        .expect("health without credentials")
        .into_inner();
    assert_eq!(
        health.status,
        tonic_health::pb::health_check_response::ServingStatus::Serving as i32
    );
}

async fn each_role_calls_what_it_may_and_nothing_else(kind: Kind) {
    let world = World::new(kind).await;
    let allowed: [(Role, &str, &[&str]); 5] = [
        (
            Role::Viewer,
            "acme",
            &[
                "GetTask",
                "GetTaskExecution",
                "GetTaskResult",
                "ListTasks",
                "WatchTask",
                "WatchTasks",
                "ListTools",
                "ListInputRequests",
            ],
        ),
        (
            Role::Client,
            "acme",
            &[
                "CreateTask",
                "GetTask",
                "GetTaskExecution",
                "UpdateTaskStatus",
                "StoreTaskResult",
                "GetTaskResult",
                "ListTasks",
                "WatchTask",
                "WatchTasks",
                "HoldTask",
                "CancelTask",
                "DeleteTask",
                "ListTools",
                "ListInputRequests",
                "AnswerInputRequests",
            ],
        ),
        (
            Role::Worker,
            "*",
            // Every call here carries no lease: a worker reads and reports
            // on a task only through the attempt it holds (`leases.rs`).
            &[
                "ListTools",
                "ClaimTask",
                "RenewLease",
                "ReleaseTask",
                "AskQuestion",
                "Heartbeat",
            ],
        ),
        (
            Role::Admin,
            "acme",
            &[
                "CreateTask",
                "GetTask",
                "GetTaskExecution",
                "UpdateTaskStatus",
                "StoreTaskResult",
                "GetTaskResult",
                "ListTasks",
                "WatchTask",
                "WatchTasks",
                "HoldTask",
                "CancelTask",
                "DeleteTask",
                "ListTools",
                "ListInputRequests",
                "AnswerInputRequests",
            ],
        ),
        (
            Role::Admin,
            "*",
            &[
                "CreateTask",
                "GetTask",
                "GetTaskExecution",
                "UpdateTaskStatus",
                "StoreTaskResult",
                "GetTaskResult",
                "ListTasks",
                "WatchTask",
                "WatchTasks",
                "HoldTask",
                "CancelTask",
                "DeleteTask",
                "ListTools",
                "ListInputRequests",
                "AnswerInputRequests",
                "CleanupExpired",
                "GetStatus",
                "LiftPause",
            ],
        ),
    ];
    for (role, tenant, may) in allowed {
        let mut who = world.identity(Some(&world.key(tenant, role).await)).await;
        for (rpc, outcome) in every_rpc(&mut who).await {
            let denied = matches!(&outcome, Err(status) if status.code() == Code::PermissionDenied);
            let unauthenticated =
                matches!(&outcome, Err(status) if status.code() == Code::Unauthenticated);
            assert!(!unauthenticated, "{role} in {tenant}: {rpc}: {outcome:?}");
            assert_eq!(
                !denied,
                may.contains(&rpc),
                "{role} in {tenant}: {rpc}: {outcome:?}"
            );
            if denied {
                let message = outcome.expect_err("denied").message().to_owned();
                assert!(!message.contains("some-task"), "{message}");
            }
        }
    }
}

macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Memory).await })*
        }
        mod sqlite {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Postgres).await })*
        }
    };
}

on_every_backend!(
    bad_credentials_are_unauthenticated_everywhere_but_health,
    each_role_calls_what_it_may_and_nothing_else,
);
