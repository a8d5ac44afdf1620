//! The noisy neighbour (issue 40): a tenant floods a tool with short tasks;
//! another tenant's tasks, created one at a time meanwhile, and the
//! flooding tenant's own urgent one start about as soon as a slot frees,
//! not after the flood. Real service, RabbitMQ and
//! worker; start times are the attempts' own (`attempt_history`), read
//! from PostgreSQL.

use std::time::Duration;

use serde_json::json;
use sqlx::postgres::PgPoolOptions;
use taskstore_proto::v1 as pb;
use tonic::transport::Channel;

use crate::common::{Env, dispatch_request};
use pb::task_store_client::TaskStoreClient;

/// The flood: this many tasks of `TASK_MS` on one worker of 4 slots (the
/// tests' workers' `--concurrency`): about 25 s of work, longer than the
/// quiet tenant's 20 s. The tasks last 200 ms, not less, so that the bound
/// (3x a task) leaves room for a busy CI machine's scheduling: with 50 ms
/// tasks a fresh-clone run measured a p99 of 162 ms against 150, all of it
/// dispatch latency, none of it unfairness.
const FLOOD: usize = 500;
const TASK_MS: u64 = 200;
/// The quiet tenant's tasks, one every `QUIET_EVERY`: a hundred, so that
/// their p99 (the bound) is a p99, not their single worst wait.
const QUIET: usize = 100;
const QUIET_EVERY: Duration = Duration::from_millis(200);

async fn create(client: &mut TaskStoreClient<Channel>, tenant: &str, priority: u32) -> String {
    let mut create = dispatch_request("sleep", json!({ "ms": TASK_MS }), None);
    if let Some(dispatch) = create.dispatch.as_mut() {
        dispatch.priority = Some(priority);
    }
    let mut request = tonic::Request::new(create);
    request
        .metadata_mut()
        .insert("x-taskstore-tenant", tenant.parse().expect("ascii"));
    client
        .create_task(request)
        .await
        .unwrap_or_else(|status| panic!("create in {tenant}: {status:?}"))
        .into_inner()
        .task_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_quiet_tenant_is_not_stuck_behind_a_noisy_ones_flood() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _worker = env.start_worker("worker-fair", "sleep", None, &[]);
    env.wait_for_consumers("sleep", 1).await;
    let client = env.client().await;

    // The flood, from four connections at once.
    let mut creators = Vec::new();
    for part in 0..4 {
        let mut client = env.client().await;
        creators.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            for _ in 0..FLOOD / 4 {
                ids.push(create(&mut client, "noisy", 0).await);
            }
            let _ = part;
            ids
        }));
    }
    let mut flood = Vec::new();
    for creator in creators {
        flood.extend(creator.await.expect("creator"));
    }
    // The quiet tenant, one task every 200 ms, while the flood drains
    // (about FLOOD × TASK_MS / 4 slots = 25 s of work).
    // Halfway, the noisy tenant itself has an urgent one: a higher
    // priority overtakes its own backlog.
    let mut quiet = Vec::new();
    let mut urgent = Vec::new();
    let mut client_quiet = client.clone();
    for n in 0..QUIET {
        quiet.push(create(&mut client_quiet, "quiet", 0).await);
        if n == QUIET / 2 {
            urgent.push(create(&mut client_quiet, "noisy", 9).await);
        }
        tokio::time::sleep(QUIET_EVERY).await;
    }

    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&env.database_url)
        .await
        .expect("PostgreSQL");
    // Every task runs, once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM tasks WHERE status = 'completed' AND attempt = 1",
        )
        .fetch_one(&pool)
        .await
        .expect("count");
        if done as usize == FLOOD + QUIET + 1 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{done} of {} completed",
            FLOOD + QUIET + 1
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // How long each quiet task waited for its start, and how long the
    // flood's last task waited (what a first-in-first-out queue would have
    // made the quiet ones wait).
    let waited = |ids: Vec<String>| {
        let pool = pool.clone();
        async move {
            let mut waits: Vec<f64> = sqlx::query_scalar(
                "SELECT (extract(epoch FROM ((attempt_history->'records'->0->>'startedAt')::timestamptz
                         - created_at)) * 1000)::float8
                 FROM tasks WHERE task_id = ANY($1)",
            )
            .bind(&ids)
            .fetch_all(&pool)
            .await
            .expect("waits");
            waits.sort_by(f64::total_cmp);
            waits
        }
    };
    let quiet_waits = waited(quiet).await;
    let urgent_wait = waited(urgent).await.last().copied().unwrap_or(f64::MAX);
    let flood_waits = waited(flood).await;
    // The 99th percentile of the hundred: the 99th wait, in order.
    let p99_quiet = quiet_waits
        .get((QUIET * 99).div_ceil(100) - 1)
        .copied()
        .unwrap_or(f64::MAX);
    let worst_flood = flood_waits.last().copied().unwrap_or(0.0);
    eprintln!(
        "fairness: quiet tenant's waits (ms) {quiet_waits:.0?}; the urgent task's {urgent_wait:.0}; the flood's longest wait {worst_flood:.0} ms"
    );
    assert!(
        worst_flood > 2_000.0,
        "the flood made a backlog ({worst_flood:.0} ms): otherwise this proves nothing"
    );
    // The bound: within 3x the tool's duration, the p99 of the
    // quiet tenant's tasks.
    assert!(
        p99_quiet <= 3.0 * TASK_MS as f64,
        "the quiet tenant's p99 wait was {p99_quiet:.0} ms: {quiet_waits:.0?}"
    );
    assert!(
        urgent_wait <= 3.0 * TASK_MS as f64,
        "the urgent task waited {urgent_wait:.0} ms behind its tenant's backlog"
    );
    env.cleanup(&["sleep"]).await;
}
