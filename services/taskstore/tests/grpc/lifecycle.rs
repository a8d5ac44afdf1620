//! Health, reflection and graceful shutdown.

use std::sync::Arc;
use std::time::Duration;

use taskstore::grpc::{InputLimits, pb};
use taskstore::settings::ServiceSettings;
use taskstore::store::StoreConfig;
use tonic::Code;

use crate::common;
use crate::{create_request, server};
use pb::task_store_client::TaskStoreClient;

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

    // Older clients (Python's grpcio-reflection, older grpcurl) ask v1alpha.
    use tonic_reflection::pb::v1alpha::server_reflection_client::ServerReflectionClient as AlphaClient;
    use tonic_reflection::pb::v1alpha::server_reflection_request::MessageRequest as AlphaRequest;
    use tonic_reflection::pb::v1alpha::server_reflection_response::MessageResponse as AlphaResponse;
    let (_, channel, _) = server(InputLimits::default()).await;
    let request = tonic_reflection::pb::v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(AlphaRequest::ListServices(String::new())),
    };
    let response = AlphaClient::new(channel)
        .server_reflection_info(tokio_stream::once(request))
        .await
        .expect("reflection v1alpha")
        .into_inner()
        .message()
        .await
        .expect("a response")
        .expect("not empty");
    let Some(AlphaResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected reflection answer: {response:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"mcp.tasks.v1.TaskStore".to_owned()),
        "{names:?}"
    );
}

/// A shutdown ends open WatchTask streams and waiting GetTaskResult calls
/// at once with UNAVAILABLE, so the server stops long before its grace.
#[tokio::test]
async fn shutdown_ends_open_streams_and_waits_at_once() {
    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
    let settings = ServiceSettings {
        shutdown_grace: Duration::from_secs(60),
        ..ServiceSettings::bare(StoreConfig::default(), InputLimits::default())
    };
    let (addr, shutdown, handle) = common::spawn_service(store, settings).await;
    let mut client = TaskStoreClient::new(common::grpc_channel(addr).await);
    let task = client
        .create_task(create_request())
        .await
        .expect("create")
        .into_inner();
    let mut watch = client
        .watch_task(pb::WatchTaskRequest {
            lease_token: None,
            task_id: task.task_id.clone(),
            session_id: None,
        })
        .await
        .expect("watch")
        .into_inner();
    watch
        .message()
        .await
        .expect("the first state")
        .expect("a task");
    let waiting = {
        let mut client = client.clone();
        let task_id = task.task_id.clone();
        tokio::spawn(async move {
            client
                .get_task_result(pb::GetTaskResultRequest {
                    task_id,
                    session_id: None,
                    wait: true,
                })
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    shutdown.cancel();
    let ended = watch
        .message()
        .await
        .expect_err("the stream ends with an error");
    assert_eq!(ended.code(), Code::Unavailable);
    assert_eq!(ended.message(), taskstore::edge::SHUTTING_DOWN);
    let waited = waiting.await.expect("join").expect_err("the wait ends");
    assert_eq!(waited.code(), Code::Unavailable);
    assert_eq!(waited.message(), taskstore::edge::SHUTTING_DOWN);
    tokio::time::timeout(Duration::from_secs(10), handle)
        .await
        .expect("the server stops without using its 60 s grace")
        .expect("serves cleanly");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn shutdown_reports_not_serving_and_stops_within_the_grace_period() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
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
