//! The gRPC edge: hostile input, error mapping, health, reflection, graceful
//! shutdown, the worker registry and a database outage, against a real
//! service on an ephemeral port over real PostgreSQL.

#[path = "../common/mod.rs"]
mod common;

mod attempt_watch;
mod fleet;
mod fuzz;
mod hostile;
mod hostile_execution;
mod lifecycle;
mod outage;
mod questions;

use std::sync::Arc;

use taskstore::grpc::{InputLimits, pb};
use taskstore::store::StoreConfig;
use taskstore::store::postgres::PgTaskStore;
use tonic::Code;
use tonic::transport::Channel;

use pb::task_store_client::TaskStoreClient;

pub(crate) const SMALL_LIMITS: InputLimits = InputLimits {
    max_json_bytes: 1024,
    max_status_message_bytes: 64,
    max_session_id_bytes: 16,
    max_message_bytes: 128 * 1024,
};

pub(crate) async fn server(
    limits: InputLimits,
) -> (TaskStoreClient<Channel>, Channel, Arc<PgTaskStore>) {
    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
    let (addr, _shutdown, _handle) = common::spawn_server(store.clone(), limits).await;
    let channel = common::grpc_channel(addr).await;
    (TaskStoreClient::new(channel.clone()), channel, store)
}

pub(crate) fn create_request() -> pb::CreateTaskRequest {
    pb::CreateTaskRequest {
        idempotency_key: None,
        no_expiry: false,
        poll_interval: None,
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: "1".into(),
        request_json: r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#.into(),
        dispatch: None,
    }
}

/// A `tools/call` of `echo` dispatched to workers.
pub(crate) fn dispatch_request() -> pb::CreateTaskRequest {
    let mut request = create_request();
    request.request_json = r#"{"method":"tools/call","params":{"name":"echo"}}"#.into();
    request.dispatch = Some(pb::Dispatch {
        priority: Default::default(),
        start_at: None,
        start_after: None,
        tool: None,
        max_attempts: None,
    });
    request
}

pub(crate) fn code<T: std::fmt::Debug>(result: Result<tonic::Response<T>, tonic::Status>) -> Code {
    match result {
        Ok(response) => panic!("expected an error, got {response:?}"),
        Err(status) => status.code(),
    }
}

pub(crate) async fn task_count(client: &mut TaskStoreClient<Channel>) -> usize {
    let request = pb::ListTasksRequest {
        cursor: None,
        session_id: None,
        page_size: Some(1000),
        ..Default::default()
    };
    client
        .list_tasks(request)
        .await
        .expect("list")
        .into_inner()
        .tasks
        .len()
}
