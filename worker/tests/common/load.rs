//! Load for the operations tests: echo tasks created one after another
//! until told to stop, each acknowledged create and each refusal kept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use taskstore_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

/// What a load saw: acknowledged tasks (id, the text they echo) and
/// refusals (code, message).
#[derive(Debug, Default)]
pub struct Seen {
    pub created: Vec<(String, String)>,
    pub refused: Vec<(tonic::Code, String)>,
}

/// Shared between loads and the test.
pub type Ledger = Arc<Mutex<Seen>>;

/// Creates echo tasks through `endpoint` (texts `label-1`, `label-2`, …)
/// until `stop`, recording them in `ledger`.
pub fn create_echo_tasks(
    endpoint: String,
    label: &'static str,
    ledger: Ledger,
    stop: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = pb::task_store_client::TaskStoreClient::connect(endpoint)
            .await
            .expect("connect");
        let mut n = 0u64;
        while !stop.is_cancelled() {
            n += 1;
            let text = format!("{label}-{n}");
            let create = super::dispatch_request("echo", json!({ "text": text }), None);
            let outcome = client.create_task(create).await;
            {
                let mut seen = ledger.lock().expect("ledger");
                match outcome {
                    Ok(task) => seen.created.push((task.into_inner().task_id, text)),
                    Err(status) => seen
                        .refused
                        .push((status.code(), status.message().to_owned())),
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

/// `Operations.GetStatus` of the service at `endpoint`.
pub async fn status(endpoint: &str) -> pb::GetStatusResponse {
    let mut client = pb::operations_client::OperationsClient::connect(endpoint.to_owned())
        .await
        .expect("connect");
    client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner()
}

/// Waits for every task in `created` to complete with the text it echoes.
pub async fn assert_all_echoed(endpoint: &str, created: &[(String, String)]) {
    let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    let mut client = pb::task_store_client::TaskStoreClient::new(channel);
    for (id, text) in created {
        let done = super::result(&mut client, id, Duration::from_secs(120)).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed, "task {id}");
        assert_eq!(
            &super::text_of(&done.result_json),
            text,
            "task {id}'s own result"
        );
    }
}
