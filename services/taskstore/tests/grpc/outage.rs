//! Failures of the database: unavailable fast, healed without a restart,
//! and internal errors that tell a client nothing.

use std::sync::Arc;
use std::time::Duration;

use taskstore::grpc::{InputLimits, pb};
use tonic::Code;

use crate::common;
use crate::{code, create_request, server, task_count};
use pb::task_store_client::TaskStoreClient;
use taskstore::store::StoreConfig;
use taskstore::store::postgres::{self, PgTaskStore, PoolSettings};

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
    let store = Arc::new(
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
