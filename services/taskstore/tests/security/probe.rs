//! The cross-tenant probe: every RPC, by every identity of one tenant, on
//! the other tenant's tasks (with and without their session, naming the
//! tenant in metadata or not, with the other tenant's cursor and lease)
//! shows nothing and changes nothing.

use std::time::Duration;

use taskstore::domain::Role;
use tonic::Code;

use super::probe_calls::{calls, never_existed, snapshot};
use super::*;

async fn cross_tenant_probe(kind: Kind) {
    let world = World::new(kind).await;
    let mut owner = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let fleet = world
        .identity(Some(&world.key("*", Role::Worker).await))
        .await;
    let intruders = [
        ("client of globex", world.key("globex", Role::Client).await),
        ("worker of globex", world.key("globex", Role::Worker).await),
        ("admin of globex", world.key("globex", Role::Admin).await),
    ];

    // The victim's tasks: one plain, one in a session, one claimed by a
    // fleet worker (so that there is a live lease to steal).
    let plain = owner
        .store
        .create_task(create(Some("acme-plain"), None, false))
        .await
        .expect("create")
        .into_inner();
    let private = owner
        .store
        .create_task(create(Some("acme-private"), Some("s1"), false))
        .await
        .expect("create")
        .into_inner();
    let running = owner
        .store
        .create_task(create(Some("acme-running"), None, true))
        .await
        .expect("create")
        .into_inner();
    let claim = fleet
        .execution
        .clone()
        .claim_task(pb::ClaimTaskRequest {
            task_id: running.task_id.clone(),
            generation: 1,
            worker_id: "fleet".into(),
            tenant_id: "acme".into(),
            ..Default::default()
        })
        .await
        .expect("the fleet worker claims acme's task")
        .into_inner();
    // An open question under the key the intruders answer.
    fleet
        .execution
        .clone()
        .ask_question(pb::AskQuestionRequest {
            task_id: running.task_id.clone(),
            lease_token: claim.lease_token.clone(),
            tenant_id: "acme".into(),
            key: "probe".into(),
            request_json: r#"{"method":"roots/list"}"#.into(),
        })
        .await
        .expect("the fleet worker asks");
    let page = owner
        .store
        .list_tasks(pb::ListTasksRequest {
            cursor: None,
            page_size: Some(1),
            session_id: None,
            statuses: Vec::new(),
            tool: None,
        })
        .await
        .expect("list")
        .into_inner();
    let cursor = page
        .next_cursor
        .expect("a cursor: acme has more than one task");
    let ids = vec![
        (plain.task_id.clone(), None),
        (private.task_id.clone(), Some("s1".to_owned())),
        (running.task_id.clone(), None),
    ];
    let before = snapshot(&mut owner, &ids).await;

    for (who, key) in &intruders {
        let mut intruder = world.identity(Some(key)).await;
        let baseline = never_existed(&mut intruder, "acme").await;
        for (id, session) in &ids {
            for session in [session.as_deref(), None] {
                let probed = calls(
                    &mut intruder,
                    "acme",
                    id,
                    session,
                    &claim.lease_token,
                    &cursor,
                )
                .await;
                for ((label, outcome), (_, unknown)) in probed.iter().zip(&baseline) {
                    let status = match (outcome, unknown) {
                        // Only an answer that a task that never existed
                        // gets too (a renewal's "stop, it is gone").
                        (Ok(answer), Ok(same))
                            if answer == same && label.starts_with("RenewLease") =>
                        {
                            assert!(
                                answer.contains("keep_running: false"),
                                "{who}: {label}: {answer}"
                            );
                            continue;
                        }
                        (Ok(answer), _) => {
                            panic!("{who}: {label} on acme's {id} succeeded: {answer}")
                        }
                        (Err(status), _) => status,
                    };
                    assert!(
                        matches!(
                            status.code(),
                            Code::NotFound | Code::PermissionDenied | Code::InvalidArgument
                        ),
                        "{who}: {label} on {id}: {status:?}"
                    );
                    let unknown = unknown
                        .as_ref()
                        .expect_err("a task that never existed is an error");
                    if status.code() != Code::InvalidArgument {
                        assert_eq!(
                            (status.code(), status.message()),
                            (unknown.code(), unknown.message()),
                            "{who}: {label}: acme's {id} is told apart from a task that never existed"
                        );
                    }
                }
            }
        }
        // Listing shows only the intruder's own tenant (empty here).
        if *who != "worker of globex" {
            let listed = intruder
                .store
                .list_tasks(pb::ListTasksRequest {
                    cursor: None,
                    page_size: None,
                    session_id: None,
                    statuses: Vec::new(),
                    tool: None,
                })
                .await
                .expect("list")
                .into_inner();
            assert!(listed.tasks.is_empty(), "{who} lists {:?}", listed.tasks);
            // Following shows only the intruder's own tenant: acme's
            // changes never reach it.
            let mut followed = intruder
                .store
                .watch_tasks(pb::WatchTasksRequest { session_id: None })
                .await
                .expect("follow")
                .into_inner();
            let changed = owner
                .store
                .create_task(create(None, None, false))
                .await
                .expect("create")
                .into_inner();
            owner
                .store
                .cancel_task(pb::CancelTaskRequest {
                    task_id: changed.task_id,
                    session_id: None,
                })
                .await
                .expect("cancel");
            let heard = tokio::time::timeout(Duration::from_millis(500), followed.message()).await;
            assert!(heard.is_err(), "{who} heard of acme's change: {heard:?}");
        }
    }

    let after = snapshot(&mut owner, &ids).await;
    assert_eq!(before, after, "acme's tasks are unchanged");
    let questions = owner
        .store
        .list_input_requests(pb::ListInputRequestsRequest {
            task_id: running.task_id.clone(),
            session_id: None,
        })
        .await
        .expect("the owner sees its question")
        .into_inner()
        .input_requests;
    assert_eq!(questions.len(), 1);
    assert_eq!(questions[0].answer_json, None, "nobody else answered it");
    // The stolen lease still belongs to the fleet worker.
    let renewed = fleet
        .execution
        .clone()
        .renew_lease(pb::RenewLeaseRequest {
            task_id: running.task_id.clone(),
            lease_token: claim.lease_token.clone(),
            tenant_id: "acme".into(),
        })
        .await
        .expect("renew")
        .into_inner();
    assert!(renewed.keep_running);
}

async fn tenants_share_task_ids_without_seeing_each_other(kind: Kind) {
    let world = World::new(kind).await;
    let mut acme = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let mut globex = world
        .identity(Some(&world.key("globex", Role::Client).await))
        .await;
    let mut operator = world
        .identity(Some(&world.key("*", Role::Admin).await))
        .await;
    for (client, text) in [(&mut acme, "acme's"), (&mut globex, "globex's")] {
        let mut request = create(Some("same-id"), None, false);
        request.request_json = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}"#
        );
        client
            .store
            .create_task(request)
            .await
            .expect("each tenant may use the id");
    }
    // Idempotency keys are per tenant too: the same key with the same call
    // gives each tenant its own task, never the other's.
    let mut keyed_ids = Vec::new();
    for client in [&mut acme, &mut globex] {
        let mut request = create(None, None, false);
        request.idempotency_key = Some("shared-key".into());
        for _ in 0..2 {
            let task = client
                .store
                .create_task(request.clone())
                .await
                .expect("each tenant may use the key")
                .into_inner();
            keyed_ids.push(task.task_id);
        }
    }
    assert_eq!(keyed_ids[0], keyed_ids[1], "a tenant's retry");
    assert_eq!(keyed_ids[2], keyed_ids[3], "a tenant's retry");
    assert_ne!(keyed_ids[0], keyed_ids[2], "tenants never share a key");
    for (client, text) in [(&mut acme, "acme's"), (&mut globex, "globex's")] {
        client
            .store
            .store_task_result(pb::StoreTaskResultRequest {
                task_id: "same-id".into(),
                status: pb::TaskStatus::Completed.into(),
                result_json: format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#),
                session_id: None,
                status_message: None,
                lease_token: None,
            })
            .await
            .expect("each stores its own result");
    }
    for (client, text) in [(&mut acme, "acme's"), (&mut globex, "globex's")] {
        let result = client
            .store
            .get_task_result(pb::GetTaskResultRequest {
                task_id: "same-id".into(),
                session_id: None,
                wait: false,
            })
            .await
            .expect("result")
            .into_inner();
        assert!(result.result_json.contains(text), "{}", result.result_json);
    }
    // An operator reaches either tenant by naming it, and must name one:
    // no silent default tenant.
    let list = || pb::ListTasksRequest {
        cursor: None,
        page_size: None,
        session_id: None,
        statuses: Vec::new(),
        tool: None,
    };
    let named = operator
        .store
        .list_tasks(naming("globex", list()))
        .await
        .expect("list")
        .into_inner();
    assert_eq!(named.tasks.len(), 2, "its task and its keyed one");
    let unnamed = operator
        .store
        .list_tasks(list())
        .await
        .expect_err("an operator must name a tenant");
    assert_eq!(unnamed.code(), tonic::Code::InvalidArgument);
    assert!(
        unnamed.message().contains("x-taskstore-tenant"),
        "{}",
        unnamed.message()
    );
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
    cross_tenant_probe,
    tenants_share_task_ids_without_seeing_each_other
);
