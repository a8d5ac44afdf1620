//! Hostile input on every RPC: a clear INVALID_ARGUMENT (or RESOURCE_EXHAUSTED)
//! and nothing changed.

use taskstore::grpc::{InputLimits, pb};
use tonic::Code;

use crate::{SMALL_LIMITS, code, create_request, server, task_count};

#[tokio::test]
async fn hostile_creates_are_invalid_argument_and_change_nothing() {
    let (mut client, _, _) = server(SMALL_LIMITS).await;
    let duration = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
    let at = |seconds, nanos| Some(prost_types::Timestamp { seconds, nanos });
    // A create dispatched to `echo` that asks to start so.
    let starting = |start_at, start_after| pb::CreateTaskRequest {
        dispatch: Some(pb::Dispatch {
            priority: Default::default(),
            tool: Some("echo".into()),
            max_attempts: None,
            start_at,
            start_after,
        }),
        ..create_request()
    };
    let cases: Vec<(&str, pb::CreateTaskRequest)> = vec![
        (
            "empty id",
            pb::CreateTaskRequest {
                task_id: Some(String::new()),
                ..create_request()
            },
        ),
        (
            "id with a space",
            pb::CreateTaskRequest {
                task_id: Some("a b".into()),
                ..create_request()
            },
        ),
        (
            "id of 129 chars",
            pb::CreateTaskRequest {
                task_id: Some("x".repeat(129)),
                ..create_request()
            },
        ),
        (
            "non-ascii id",
            pb::CreateTaskRequest {
                task_id: Some("tâche".into()),
                ..create_request()
            },
        ),
        (
            "start time and delay together",
            starting(at(4_000_000_000, 0), duration(5, 0)),
        ),
        ("start time long past", starting(at(0, 0), None)),
        (
            "start time with invalid nanos",
            starting(at(4_000_000_000, -1), None),
        ),
        (
            "start years ahead",
            pb::CreateTaskRequest {
                no_expiry: true,
                ..starting(None, duration(20 * 365 * 86_400, 0))
            },
        ),
        (
            "priority out of range",
            pb::CreateTaskRequest {
                dispatch: Some(pb::Dispatch {
                    priority: Some(10),
                    ..starting(None, None).dispatch.unwrap_or_default()
                }),
                ..create_request()
            },
        ),
        (
            "priority far out of range",
            pb::CreateTaskRequest {
                dispatch: Some(pb::Dispatch {
                    priority: Some(u32::MAX),
                    ..starting(None, None).dispatch.unwrap_or_default()
                }),
                ..create_request()
            },
        ),
        (
            "empty idempotency key",
            pb::CreateTaskRequest {
                idempotency_key: Some(String::new()),
                ..create_request()
            },
        ),
        (
            "idempotency key of 256 bytes",
            pb::CreateTaskRequest {
                idempotency_key: Some("k".repeat(256)),
                ..create_request()
            },
        ),
        (
            "control char idempotency key",
            pb::CreateTaskRequest {
                idempotency_key: Some("a\u{7}b".into()),
                ..create_request()
            },
        ),
        (
            "empty session",
            pb::CreateTaskRequest {
                session_id: Some(String::new()),
                ..create_request()
            },
        ),
        (
            "long session",
            pb::CreateTaskRequest {
                session_id: Some("s".repeat(17)),
                ..create_request()
            },
        ),
        (
            "control char session",
            pb::CreateTaskRequest {
                session_id: Some("a\nb".into()),
                ..create_request()
            },
        ),
        (
            "zero ttl",
            pb::CreateTaskRequest {
                ttl: duration(0, 0),
                ..create_request()
            },
        ),
        (
            "negative ttl",
            pb::CreateTaskRequest {
                ttl: duration(-5, 0),
                ..create_request()
            },
        ),
        (
            "unnormalized ttl",
            pb::CreateTaskRequest {
                ttl: duration(1, 2_000_000_000),
                ..create_request()
            },
        ),
        (
            "huge ttl",
            pb::CreateTaskRequest {
                ttl: duration(i64::MAX, 0),
                ..create_request()
            },
        ),
        (
            "array request",
            pb::CreateTaskRequest {
                request_json: "[1,2]".into(),
                ..create_request()
            },
        ),
        (
            "tools/call with array arguments",
            pb::CreateTaskRequest {
                request_json: r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":[1]}}"#.into(),
                ..create_request()
            },
        ),
        (
            "broken request",
            pb::CreateTaskRequest {
                request_json: "{\"a\":".into(),
                ..create_request()
            },
        ),
        (
            "empty request",
            pb::CreateTaskRequest {
                request_json: String::new(),
                ..create_request()
            },
        ),
        (
            "oversize request",
            pb::CreateTaskRequest {
                request_json: format!("{{\"pad\":\"{}\"}}", "x".repeat(2000)),
                ..create_request()
            },
        ),
        (
            "null request id",
            pb::CreateTaskRequest {
                request_id_json: "null".into(),
                ..create_request()
            },
        ),
        (
            "object request id",
            pb::CreateTaskRequest {
                request_id_json: "{}".into(),
                ..create_request()
            },
        ),
        (
            "bare word request id",
            pb::CreateTaskRequest {
                request_id_json: "abc".into(),
                ..create_request()
            },
        ),
        (
            "empty request id",
            pb::CreateTaskRequest {
                request_id_json: String::new(),
                ..create_request()
            },
        ),
    ];
    for (name, request) in cases {
        match client.create_task(request).await {
            Err(status) => {
                assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
                assert!(!status.message().is_empty(), "{name}: the error says why");
            }
            Ok(task) => panic!("{name}: accepted as {task:?}"),
        }
    }
    assert_eq!(task_count(&mut client).await, 0, "nothing was created");
    // The same client still works: the server did not fall over.
    client
        .create_task(create_request())
        .await
        .expect("a good create");
}

#[tokio::test]
async fn hostile_ids_statuses_and_payloads_change_nothing() {
    let (mut client, _, _) = server(SMALL_LIMITS).await;
    let task = client
        .create_task(create_request())
        .await
        .expect("create")
        .into_inner();
    let id = task.task_id.clone();

    for bad_id in ["", " ", "a\tb", &"y".repeat(200)] {
        let get = pb::GetTaskRequest {
            task_id: bad_id.to_owned(),
            session_id: None,
        };
        assert_eq!(
            code(client.get_task(get).await),
            Code::InvalidArgument,
            "get {bad_id:?}"
        );
        let cancel = pb::CancelTaskRequest {
            task_id: bad_id.to_owned(),
            session_id: None,
        };
        assert_eq!(
            code(client.cancel_task(cancel).await),
            Code::InvalidArgument
        );
        let result = pb::GetTaskResultRequest {
            task_id: bad_id.to_owned(),
            session_id: None,
            wait: true,
        };
        assert_eq!(
            code(client.get_task_result(result).await),
            Code::InvalidArgument
        );
    }
    let update = |status: i32, message: Option<String>| pb::UpdateTaskStatusRequest {
        task_id: id.clone(),
        status,
        status_message: message,
        session_id: None,
        lease_token: None,
    };
    for status in [0, 6, 99, -1, i32::MIN] {
        assert_eq!(
            code(client.update_task_status(update(status, None)).await),
            Code::InvalidArgument
        );
    }
    let long_message = Some("m".repeat(65));
    assert_eq!(
        code(client.update_task_status(update(1, long_message)).await),
        Code::InvalidArgument
    );
    for bad_lease in [String::new(), "l".repeat(65), "a b".into()] {
        let fenced = pb::UpdateTaskStatusRequest {
            lease_token: Some(bad_lease),
            ..update(1, None)
        };
        assert_eq!(
            code(client.update_task_status(fenced).await),
            Code::InvalidArgument
        );
    }

    let store = |status: pb::TaskStatus, json: &str| pb::StoreTaskResultRequest {
        task_id: id.clone(),
        status: status.into(),
        result_json: json.to_owned(),
        session_id: None,
        status_message: None,
        lease_token: None,
    };
    for status in [
        pb::TaskStatus::Unspecified,
        pb::TaskStatus::Working,
        pb::TaskStatus::InputRequired,
        pb::TaskStatus::Cancelled,
    ] {
        assert_eq!(
            code(client.store_task_result(store(status, "{}")).await),
            Code::InvalidArgument,
            "{status:?}"
        );
    }
    for json in [
        "",
        "null",
        "[]",
        "{",
        &format!("{{\"x\":\"{}\"}}", "z".repeat(2000)),
    ] {
        assert_eq!(
            code(
                client
                    .store_task_result(store(pb::TaskStatus::Completed, json))
                    .await
            ),
            Code::InvalidArgument
        );
    }
    let garbage_cursor = |cursor: String| pb::ListTasksRequest {
        cursor: Some(cursor),
        session_id: None,
        page_size: None,
        ..Default::default()
    };
    assert_eq!(
        code(client.list_tasks(garbage_cursor("bogus".into())).await),
        Code::InvalidArgument
    );
    assert_eq!(
        code(client.list_tasks(garbage_cursor("c".repeat(5000))).await),
        Code::InvalidArgument
    );

    let after = client
        .get_task(pb::GetTaskRequest {
            task_id: id,
            session_id: None,
        })
        .await
        .expect("get");
    assert_eq!(
        after.into_inner(),
        task,
        "no refused request changed the task"
    );
}

#[tokio::test]
async fn oversize_messages_are_resource_exhausted() {
    let (mut client, _, _) = server(SMALL_LIMITS).await;
    let huge = pb::CreateTaskRequest {
        request_json: format!(
            "{{\"pad\":\"{}\"}}",
            "x".repeat(SMALL_LIMITS.max_message_bytes)
        ),
        ..create_request()
    };
    let status = client.create_task(huge).await.expect_err("refused");
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    assert_eq!(task_count(&mut client).await, 0);
}

#[tokio::test]
async fn missing_and_foreign_tasks_share_one_not_found() {
    let (mut client, _, _) = server(InputLimits::default()).await;
    let request = pb::CreateTaskRequest {
        session_id: Some("alice".into()),
        ..create_request()
    };
    let task = client
        .create_task(request)
        .await
        .expect("create")
        .into_inner();
    let foreign = client
        .get_task(pb::GetTaskRequest {
            task_id: task.task_id,
            session_id: Some("bob".into()),
        })
        .await
        .expect_err("hidden");
    let missing = client
        .get_task(pb::GetTaskRequest {
            task_id: "missing".into(),
            session_id: Some("bob".into()),
        })
        .await
        .expect_err("missing");
    assert_eq!(foreign.code(), Code::NotFound);
    assert_eq!(
        (foreign.code(), foreign.message()),
        (missing.code(), missing.message())
    );
}

#[tokio::test]
async fn list_filters_refuse_hostile_values() {
    let (mut client, _, _) = server(InputLimits::default()).await;
    let request = |statuses: Vec<i32>, tool: Option<&str>| pb::ListTasksRequest {
        statuses,
        tool: tool.map(str::to_owned),
        ..Default::default()
    };
    for (bad, field) in [
        (request(vec![0], None), "statuses"),
        (request(vec![99], None), "statuses"),
        (request(vec![-1], None), "statuses"),
        (request(vec![1; 17], None), "statuses"),
        (request(vec![], Some("no spaces")), "tool"),
        (request(vec![], Some("")), "tool"),
        (request(vec![], Some(&"t".repeat(129))), "tool"),
    ] {
        let refused = client.list_tasks(bad).await.expect_err("refused");
        assert_eq!(refused.code(), Code::InvalidArgument);
        assert!(
            refused.message().starts_with(field),
            "{}",
            refused.message()
        );
    }
    let fine = client
        .list_tasks(request(vec![1, 1, 5], Some("echo")))
        .await
        .expect("repeats are fine");
    assert!(fine.into_inner().tasks.is_empty());
}
