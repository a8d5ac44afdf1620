//! PostgreSQL's disk fills up under load, then space comes back (issue
//! 27): nothing acknowledged is lost, refused calls get the retryable
//! UNAVAILABLE naming the condition (never INTERNAL), the condition is
//! logged once for the episode and shown by `taskstore status` and a
//! metric, and the service and workers carry on without a restart.

mod cluster;
#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use cluster::SmallDiskPostgres;
use common::Env;
use common::load::{Ledger, assert_all_echoed, create_echo_tasks, status};
use tokio_util::sync::CancellationToken;

/// The `/metrics` text of `addr`.
async fn scrape(addr: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_with_unavailable_loses_nothing_and_recovers() {
    let postgres = SmallDiskPostgres::start(64);
    let migrate = std::process::Command::new(common::taskstore_binary())
        .args(["migrate", "--database-url", &postgres.url()])
        .status()
        .expect("migrate");
    assert!(migrate.success(), "migrations on the small disk");
    let mut env = Env::new().await;
    env.database_url = postgres.url();
    env.start_service(&["--metrics-listen", "127.0.0.1:0"]);
    let mut worker = env.start_worker("disk-worker", "echo", None, &[]);

    let seen = Ledger::default();
    let stop = CancellationToken::new();
    let loader = create_echo_tasks(env.endpoint.clone(), "disk", seen.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(
        !seen.lock().expect("seen").created.is_empty(),
        "tasks flow before the disk fills"
    );

    postgres.fill();
    common::eventually(
        "creates refused for want of space",
        Duration::from_secs(60),
        || {
            let refused = seen.lock().expect("seen").refused.len();
            async move { refused >= 20 }
        },
    )
    .await;
    let in_episode = status(&env.endpoint).await;
    let database = in_episode.database.expect("database status");
    let metrics = scrape(&env.metrics_endpoint.clone().expect("metrics")).await;

    postgres.free();
    if !postgres.is_running() {
        eprintln!("PostgreSQL stopped for want of space; starting it again");
        postgres.restart();
    }
    let refused_before = seen.lock().expect("seen").created.len();
    common::eventually(
        "creates succeed again once space is back",
        Duration::from_secs(60),
        || {
            let created = seen.lock().expect("seen").created.len();
            async move { created > refused_before + 20 }
        },
    )
    .await;
    stop.cancel();
    loader.await.expect("load");

    let seen = std::mem::take(&mut *seen.lock().expect("seen"));
    let wrong: Vec<_> = seen
        .refused
        .iter()
        .filter(|(code, _)| *code != tonic::Code::Unavailable)
        .collect();
    assert!(
        wrong.is_empty(),
        "refusals other than UNAVAILABLE: {wrong:?}"
    );
    assert!(
        seen.refused
            .iter()
            .any(|(_, message)| message.contains("out of disk space")),
        "a refusal names the condition: {:?}\n{}",
        seen.refused.first(),
        postgres.log()
    );
    assert!(
        database.condition.contains("out of disk space") && database.condition_since.is_some(),
        "taskstore status shows the condition: {database:?}"
    );
    assert!(
        metrics.contains(r#"taskstore_database_resource_refusals_total{condition="disk_full"}"#),
        "the refusals are counted"
    );
    let logged = env
        .service_logs
        .lock()
        .expect("logs")
        .iter()
        .filter(|line| line.contains("database out of resources"))
        .count();
    assert_eq!(logged, 1, "the condition is logged once for the episode");

    // Every acknowledged create runs, once, with its own result; the
    // service and the worker were never restarted.
    assert_all_echoed(&env.endpoint, &seen.created).await;
    assert!(!worker.has_exited(), "the worker carried on");
    assert!(
        !env.service.as_mut().expect("service").has_exited(),
        "the service carried on"
    );
    env.cleanup(&["echo"]).await;
}
