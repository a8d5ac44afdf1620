//! A rolling upgrade under load (issue 27), as the Kubernetes guide does
//! it: the previous release's service and worker run with tasks flowing;
//! this release's migrations are applied under them (they must keep
//! working on the new schema: expand, then contract a release later);
//! this release's service and worker start beside them; the old ones are
//! stopped. Every task created through either service completes once with
//! its own result.
//!
//! The previous release is the last commit before the newest migration,
//! built by `worker/tests/upgrade/run` (which sets UPGRADE_FROM_BIN); the
//! `upgrade` nextest profile runs only this.

mod common;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Env, result, text_of};
use serde_json::json;
use taskstore_proto::v1 as pb;
use tokio_util::sync::CancellationToken;

type Created = Arc<Mutex<Vec<(String, String)>>>;

/// Creates echo tasks through `endpoint` until `stop`, labelled `label`.
fn load(
    endpoint: String,
    label: &'static str,
    created: Created,
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
            let create = common::dispatch_request("echo", json!({ "text": text }), None);
            let task = client
                .create_task(create)
                .await
                .unwrap_or_else(|status| panic!("{label} create: {status:?}"));
            created
                .lock()
                .expect("created")
                .push((task.into_inner().task_id, text));
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_under_load_completes_every_task_once() {
    let previous = std::env::var_os("UPGRADE_FROM_BIN")
        .map(PathBuf::from)
        .expect("UPGRADE_FROM_BIN is not set: run worker/tests/upgrade/run, which builds the previous release's binaries");
    let mut old = Env::new().await;
    old.binaries = Some(previous);
    old.start_service(&[]);
    let mut old_worker = old.start_worker("old-worker", "echo", None, &[]);
    let created: Created = Arc::default();
    let stop_old = CancellationToken::new();
    let old_load = load(
        old.endpoint.clone(),
        "old",
        created.clone(),
        stop_old.clone(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The migrations Job of the new release, under the running old one.
    let migrated = std::process::Command::new(common::taskstore_binary())
        .args(["migrate", "--database-url", &old.database_url])
        .status()
        .expect("migrate");
    assert!(migrated.success(), "the new release's migrations apply");
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The new release beside the old one, sharing the database and queues.
    let mut new = old.sibling();
    new.start_service(&[]);
    let mut new_worker = new.start_worker("new-worker", "echo", None, &[]);
    let stop_new = CancellationToken::new();
    let new_load = load(
        new.endpoint.clone(),
        "new",
        created.clone(),
        stop_new.clone(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The old release goes, gracefully, as a rollout stops its pods: the
    // worker first (it reports to the old service; in a cluster it would
    // reach a new one through the Service), then the service.
    stop_old.cancel();
    old_load.await.expect("old load");
    old_worker.signal("-TERM");
    assert!(
        old_worker.wait_exit(Duration::from_secs(30)).success(),
        "the old worker stops cleanly"
    );
    let mut old_service = old.service.take().expect("old service");
    old_service.signal("-TERM");
    assert!(
        old_service.wait_exit(Duration::from_secs(30)).success(),
        "the old service stops cleanly"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop_new.cancel();
    new_load.await.expect("new load");

    let created = std::mem::take(&mut *created.lock().expect("created"));
    let through = |label: &str| {
        created
            .iter()
            .filter(|(_, text)| text.starts_with(label))
            .count()
    };
    assert!(
        through("old-") > 50 && through("new-") > 50,
        "tasks flowed through both: {} old, {} new",
        through("old-"),
        through("new-")
    );
    let mut client = new.client().await;
    for (id, text) in &created {
        let done = result(&mut client, id, Duration::from_secs(120)).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed, "task {id}");
        assert_eq!(&text_of(&done.result_json), text, "task {id}'s own result");
    }
    assert!(!new_worker.has_exited());
    new.cleanup(&["echo"]).await;
}
