//! `fairness`: the noisy neighbour as a benchmark (issue 40). Before the
//! clock starts, tenant `noisy` floods `--tool` with `--flood` tasks (each
//! asked to run `--sleep-ms`); then each client is a quiet tenant of its
//! own (`quiet-<n>`) that creates one task, waits for its result, and
//! creates the next so that all of them together create `--rate` a second.
//! `quiet_create_to_worker_start` is what a quiet tenant waits behind the
//! flood (the `noop` tool answers the time it started); `flood_left` is
//! how much of the flood still waited when the run ended (it must, for the
//! run to have measured anything).

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use taskstore_proto::v1 as pb;

use super::prepare::create_request_with;
use super::stats::{Recorded, samples};
use super::walk::unix_micros;
use super::{BenchError, Shared};

/// The header that names the tenant under `--auth none`.
const TENANT_HEADER: &str = "x-taskstore-tenant";
/// Flood creates in flight at once.
const FLOOD_CONCURRENCY: usize = 16;

fn in_tenant<T>(message: T, tenant: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Ok(value) = tenant.parse() {
        request.metadata_mut().insert(TENANT_HEADER, value);
    }
    request
}

fn arguments(shared: &Shared, n: u64) -> serde_json::Value {
    match shared.args.sleep_ms {
        Some(range) => serde_json::json!({ "ms": range.for_task(n) }),
        None => serde_json::json!({}),
    }
}

/// Creates the flood; the ids of its tasks.
pub(crate) async fn flood(shared: &Shared) -> Result<Vec<String>, BenchError> {
    let count = shared.args.flood.unwrap_or(0);
    let creates = futures_util::stream::iter(0..count).map(|n| {
        let mut client = shared.client(n as usize);
        let request = create_request_with(Some(&shared.args.tool), n, arguments(shared, n));
        async move {
            client
                .create_task(in_tenant(request, "noisy"))
                .await
                .map(|created| created.into_inner().task_id)
        }
    });
    let ids: Vec<Result<String, tonic::Status>> =
        creates.buffer_unordered(FLOOD_CONCURRENCY).collect().await;
    Ok(ids.into_iter().collect::<Result<_, _>>()?)
}

/// One quiet tenant's loop.
pub(crate) async fn quiet(
    shared: &Shared,
    index: usize,
    recorded: &mut Recorded,
) -> Result<(), BenchError> {
    let tenant = format!("quiet-{index}");
    let mut client = shared.client(index);
    // Each tenant's share of the rate, its first create spread over one
    // period so that the tenants do not all create at once.
    let period = shared.args.rate.map_or(Duration::from_secs(1), |rate| {
        Duration::from_secs_f64(shared.args.clients.max(1) as f64 / rate.max(1e-3))
    });
    tokio::time::sleep(period.mul_f64(index as f64 / shared.args.clients.max(1) as f64)).await;
    let mut n = 1_000_000 + index as u64;
    while !shared.finished() {
        let begun = Instant::now();
        let sent_us = unix_micros();
        let request = create_request_with(Some(&shared.args.tool), n, arguments(shared, n));
        let task = client
            .create_task(in_tenant(request, &tenant))
            .await?
            .into_inner();
        let mut wait = in_tenant(
            pb::GetTaskResultRequest {
                task_id: task.task_id,
                session_id: None,
                wait: true,
            },
            &tenant,
        );
        wait.set_timeout(Duration::from_secs(120));
        let result = client.get_task_result(wait).await?.into_inner();
        let started_us = serde_json::from_str::<serde_json::Value>(&result.result_json)
            .ok()
            .and_then(|r| r["content"][0]["text"].as_str()?.parse::<u64>().ok());
        if let Some(started_us) = started_us {
            samples(recorded, "quiet_create_to_worker_start")
                .record_micros(started_us.saturating_sub(sent_us));
        }
        samples(recorded, "quiet_create_to_result").record(begun.elapsed());
        shared.count_one();
        n += shared.args.clients as u64;
        tokio::time::sleep(period.saturating_sub(begun.elapsed())).await;
    }
    Ok(())
}

/// How many of the flood's tasks had not finished when the run ended.
pub(crate) async fn flood_left(shared: &Shared, ids: &[String]) -> Result<u64, BenchError> {
    let mut left = 0;
    let mut client = shared.client(0);
    for id in ids {
        let task = client
            .get_task(in_tenant(
                pb::GetTaskRequest {
                    task_id: id.clone(),
                    session_id: None,
                },
                "noisy",
            ))
            .await?
            .into_inner();
        if task.status == i32::from(pb::TaskStatus::Working) {
            left += 1;
        }
    }
    Ok(left)
}
