//! The gRPC edge: hostile input, error mapping, health, reflection, graceful
//! shutdown and a database outage, against a real server on an ephemeral
//! port over real PostgreSQL.

mod common;

use std::sync::Arc;
use std::time::Duration;

use taskstore::grpc::{InputLimits, pb};
use taskstore::store::postgres::{self, PgTaskStore, PoolSettings};
use taskstore::store::{StoreConfig, TaskStore};
use tonic::Code;
use tonic::transport::Channel;

use pb::task_store_client::TaskStoreClient;

const SMALL_LIMITS: InputLimits = InputLimits {
    max_json_bytes: 1024,
    max_status_message_bytes: 64,
    max_session_id_bytes: 16,
    max_message_bytes: 128 * 1024,
};

async fn server(limits: InputLimits) -> (TaskStoreClient<Channel>, Channel, Arc<PgTaskStore>) {
    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
    let (addr, _shutdown, _handle) = common::spawn_server(store.clone(), limits).await;
    let channel = common::grpc_channel(addr).await;
    (TaskStoreClient::new(channel.clone()), channel, store)
}

fn create_request() -> pb::CreateTaskRequest {
    pb::CreateTaskRequest {
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: "1".into(),
        request_json: r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.into(),
        dispatch: None,
    }
}

fn code<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    match result {
        Ok(response) => panic!("expected an error, got {response:?}"),
        Err(status) => status.code(),
    }
}

async fn task_count(client: &mut TaskStoreClient<Channel>) -> usize {
    let request = pb::ListTasksRequest {
        cursor: None,
        session_id: None,
        page_size: Some(1000),
    };
    client
        .list_tasks(request)
        .await
        .expect("list")
        .into_inner()
        .tasks
        .len()
}

#[tokio::test]
async fn hostile_creates_are_invalid_argument_and_change_nothing() {
    let (mut client, _, _) = server(SMALL_LIMITS).await;
    let duration = |seconds, nanos| Some(prost_types::Duration { seconds, nanos });
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
async fn internal_errors_reach_clients_without_details() {
    let (mut client, _, store) = server(InputLimits::default()).await;
    let task = client
        .create_task(create_request())
        .await
        .expect("create")
        .into_inner();
    // A row no version of the service writes.
    sqlx::query("UPDATE tasks SET poll_interval_ms = -5 WHERE task_id = $1")
        .bind(&task.task_id)
        .execute(store.pool())
        .await
        .expect("corrupt the row");
    let status = client
        .get_task(pb::GetTaskRequest {
            task_id: task.task_id,
            session_id: None,
        })
        .await
        .expect_err("corrupt row");
    assert_eq!(status.code(), Code::Internal);
    assert_eq!(status.message(), "corrupt task row");
}

#[tokio::test]
async fn health_and_reflection_serve_grpcurl() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let (_, channel, _) = server(InputLimits::default()).await;
    let mut health = HealthClient::new(channel.clone());
    for service in ["", "mcp.tasks.v1.TaskStore"] {
        let status = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .expect("health check")
            .into_inner()
            .status;
        assert_eq!(status, ServingStatus::Serving as i32, "{service:?}");
    }

    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection
        .server_reflection_info(tokio_stream::once(request))
        .await
        .expect("reflection")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("a response")
        .expect("not empty");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer: {response:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"mcp.tasks.v1.TaskStore".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
}

#[tokio::test]
async fn shutdown_reports_not_serving_and_stops_within_the_grace_period() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let store: Arc<dyn TaskStore> = Arc::new(common::pg_store(StoreConfig::default()).await);
    let (addr, shutdown, handle) = common::spawn_server(store, InputLimits::default()).await;
    let mut health = HealthClient::new(common::grpc_channel(addr).await);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: "mcp.tasks.v1.TaskStore".into(),
        })
        .await
        .expect("watch")
        .into_inner();
    let first = watch.message().await.expect("status").expect("a status");
    assert_eq!(first.status, ServingStatus::Serving as i32);

    shutdown.cancel();
    let next = watch.message().await.expect("status").expect("a status");
    assert_eq!(next.status, ServingStatus::NotServing as i32);
    // The open watch stream is an in-flight RPC: the server waits for it up
    // to its grace period (2 s in tests), then stops anyway.
    tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("the server stops after its grace period")
        .expect("the server task ends cleanly");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "no longer accepting"
    );
}

#[tokio::test]
async fn database_outage_is_unavailable_fast_and_heals_without_restart() {
    let target = common::database_url()
        .parse::<sqlx::postgres::PgConnectOptions>()
        .map(|options| (options.get_host().to_owned(), options.get_port()))
        .expect("database url");
    let target = tokio::net::lookup_host(target)
        .await
        .expect("resolve")
        .next()
        .expect("an address");
    let proxy = common::proxy::Proxy::start(target).await;

    let (schema_options, _) = common::fresh_schema().await;
    let options = schema_options.host("127.0.0.1").port(proxy.addr().port());
    let settings = PoolSettings {
        max_connections: 4,
        acquire_timeout: Duration::from_secs(2),
    };
    let pool = postgres::lazy_pool(options, settings);
    postgres::migrate(&pool)
        .await
        .expect("migrate through the proxy");
    let store: Arc<dyn TaskStore> = Arc::new(
        PgTaskStore::open(pool, StoreConfig::default())
            .await
            .expect("open"),
    );
    let (addr, _shutdown, _handle) = common::spawn_server(store, InputLimits::default()).await;
    let mut client = TaskStoreClient::new(common::grpc_channel(addr).await);
    let task = client
        .create_task(create_request())
        .await
        .expect("create")
        .into_inner();
    let get = || pb::GetTaskRequest {
        task_id: task.task_id.clone(),
        session_id: None,
    };

    proxy.go_down();
    for _ in 0..3 {
        let outcome = tokio::time::timeout(Duration::from_secs(10), client.get_task(get()))
            .await
            .expect("an answer, not a hang");
        assert_eq!(code(outcome), Code::Unavailable);
    }
    let create = tokio::time::timeout(
        Duration::from_secs(10),
        client.create_task(create_request()),
    )
    .await
    .expect("an answer, not a hang");
    assert_eq!(code(create), Code::Unavailable);

    proxy.come_back();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match client.get_task(get()).await {
            Ok(found) => {
                assert_eq!(found.into_inner(), task);
                break;
            }
            Err(status) if status.code() == Code::Unavailable => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "the service did not recover"
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(status) => panic!("unexpected error while recovering: {status:?}"),
        }
    }
    assert_eq!(
        task_count(&mut client).await,
        1,
        "the refused create left nothing behind"
    );
}
