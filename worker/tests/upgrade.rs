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
use std::time::Duration;

use common::Env;
use common::load::{Ledger, assert_all_echoed, create_echo_tasks};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_under_load_completes_every_task_once() {
    let previous = std::env::var_os("UPGRADE_FROM_BIN")
        .map(PathBuf::from)
        .expect("UPGRADE_FROM_BIN is not set: run worker/tests/upgrade/run, which builds the previous release's binaries");
    let mut old = Env::new().await;
    old.binaries = Some(previous);
    old.start_service(&[]);
    let mut old_worker = old.start_worker("old-worker", "echo", None, &[]);
    let ledger = Ledger::default();
    let stop_old = CancellationToken::new();
    let old_load = create_echo_tasks(
        old.endpoint.clone(),
        "old",
        ledger.clone(),
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
    let new_load = create_echo_tasks(
        new.endpoint.clone(),
        "new",
        ledger.clone(),
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

    let seen = std::mem::take(&mut *ledger.lock().expect("ledger"));
    assert!(
        seen.refused.is_empty(),
        "no create was refused: {:?}",
        seen.refused.first()
    );
    let through = |label: &str| {
        seen.created
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
    assert_all_echoed(&new.endpoint, &seen.created).await;
    assert!(!new_worker.has_exited());
    new.cleanup(&["echo"]).await;
}
