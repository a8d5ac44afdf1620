//! What each client does, per scenario.

use std::time::{Duration, Instant};

use taskstore_proto::v1 as pb;

use super::prepare::{Prepared, create_request, create_request_with};
use super::stats::{Recorded, samples};
use super::walk::{Walk, unix_micros};
use super::{BenchError, Scenario, Shared};

const PAGE_SIZE: u32 = 100;

/// One client's loop; returns its samples.
pub(crate) async fn client(
    shared: Shared,
    prepared: Prepared,
    index: usize,
) -> Result<Recorded, BenchError> {
    let mut recorded = Recorded::new();
    match shared.args.scenario {
        Scenario::Create => create(&shared, index, &mut recorded).await?,
        Scenario::Get => get(&shared, &prepared, index, &mut recorded).await?,
        Scenario::Poll => poll(&shared, index, &mut recorded).await?,
        Scenario::E2e => e2e(&shared, index, &mut recorded).await?,
        Scenario::List => list(&shared, index, &mut recorded).await?,
        Scenario::Watch => super::watch::client(&shared, &prepared, index, &mut recorded).await?,
        Scenario::McpCall => super::mcp::call(&shared, index, &mut recorded).await?,
        Scenario::Fairness => super::fairness::quiet(&shared, index, &mut recorded).await?,
        Scenario::Fill => fill(&shared, index, &mut recorded).await?,
        // Runs on its own (`streams.rs`), not as clients of one loop.
        Scenario::McpStreams => {}
    }
    Ok(recorded)
}

async fn create(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let mut n = index as u64;
    while !shared.finished() {
        let started = Instant::now();
        client.create_task(create_request(None, n)).await?;
        samples(recorded, "create").record(started.elapsed());
        shared.count_one();
        n += shared.args.clients as u64;
    }
    Ok(())
}

async fn fill(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let mut n = index as u64;
    while !shared.finished() {
        let arguments = match shared.args.sleep_ms {
            Some(range) => serde_json::json!({ "ms": range.for_task(n) }),
            None => serde_json::json!({}),
        };
        let started = Instant::now();
        client
            .create_task(create_request_with(Some(&shared.args.tool), n, arguments))
            .await?;
        samples(recorded, "create").record(started.elapsed());
        shared.count_one();
        n += shared.args.clients as u64;
    }
    Ok(())
}

async fn get(
    shared: &Shared,
    prepared: &Prepared,
    index: usize,
    recorded: &mut Recorded,
) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let ids = &prepared.task_ids;
    let population = if prepared.seeded > 0 {
        prepared.seeded
    } else {
        ids.len() as u64
    };
    if population == 0 {
        return Ok(());
    }
    let mut walk = Walk::new(index);
    let mut pace = Pace::new(shared, index);
    while !shared.finished() {
        pace.wait().await;
        let pick = walk.next_below(population);
        let id = if prepared.seeded > 0 {
            format!("bench-{}", pick + 1)
        } else {
            ids[pick as usize].clone()
        };
        let started = Instant::now();
        client
            .get_task(pb::GetTaskRequest {
                task_id: id,
                session_id: None,
            })
            .await?;
        samples(recorded, "get").record(started.elapsed());
        shared.count_one();
    }
    Ok(())
}

async fn poll(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let mut n = index as u64;
    while !shared.finished() {
        let begun = Instant::now();
        let task = client
            .create_task(create_request(Some(&shared.args.tool), n))
            .await?
            .into_inner();
        samples(recorded, "create").record(begun.elapsed());
        let interval = shared.args.poll_interval.unwrap_or_else(|| {
            task.poll_interval
                .and_then(|d| Duration::try_from(d).ok())
                .unwrap_or(Duration::from_secs(1))
        });
        loop {
            tokio::time::sleep(interval).await;
            let started = Instant::now();
            let polled = client
                .get_task(pb::GetTaskRequest {
                    task_id: task.task_id.clone(),
                    session_id: None,
                })
                .await?
                .into_inner();
            samples(recorded, "get").record(started.elapsed());
            if pb::TaskStatus::try_from(polled.status).is_ok_and(pb::TaskStatus::is_terminal) {
                break;
            }
        }
        let started = Instant::now();
        let request = pb::GetTaskResultRequest {
            task_id: task.task_id,
            session_id: None,
            wait: false,
        };
        client.get_task_result(request).await?;
        samples(recorded, "result").record(started.elapsed());
        samples(recorded, "create_to_result").record(begun.elapsed());
        shared.count_one();
        n += shared.args.clients as u64;
    }
    Ok(())
}

async fn e2e(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let mut n = index as u64;
    let mut pace = Pace::new(shared, index);
    while !shared.finished() {
        pace.wait().await;
        let sleep_ms = shared.args.sleep_ms.map(|range| range.for_task(n));
        let arguments = match sleep_ms {
            Some(ms) => serde_json::json!({ "ms": ms }),
            None => serde_json::json!({ "n": n }),
        };
        let sent_us = unix_micros();
        let begun = Instant::now();
        let task = client
            .create_task(create_request_with(Some(&shared.args.tool), n, arguments))
            .await?
            .into_inner();
        samples(recorded, "create").record(begun.elapsed());
        let mut request = tonic::Request::new(pb::GetTaskResultRequest {
            task_id: task.task_id,
            session_id: None,
            wait: true,
        });
        request.set_timeout(Duration::from_secs(60));
        let result = client.get_task_result(request).await?.into_inner();
        samples(recorded, "create_to_result").record(begun.elapsed());
        // The `noop` tool answers with the time it started.
        let started_us = serde_json::from_str::<serde_json::Value>(&result.result_json)
            .ok()
            .and_then(|r| {
                r["content"][0]["text"]
                    .as_str()
                    .and_then(|t| t.parse::<u64>().ok())
            });
        if let Some(started_us) = started_us {
            samples(recorded, "create_to_worker_start")
                .record_micros(started_us.saturating_sub(sent_us));
        }
        if let Some(ms) = sleep_ms {
            samples(recorded, "tool_run").record_micros(ms.saturating_mul(1000));
        }
        shared.count_one();
        n += shared.args.clients as u64;
    }
    Ok(())
}

async fn list(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    while !shared.finished() {
        // One pass over every page; only complete passes say where the first
        // and the last tenth of the pages are.
        let mut pass = Vec::new();
        let mut cursor = None;
        let complete = loop {
            let started = Instant::now();
            let listed = client
                .list_tasks(pb::ListTasksRequest {
                    cursor,
                    session_id: None,
                    page_size: Some(PAGE_SIZE),
                    ..pb::ListTasksRequest::default()
                })
                .await?
                .into_inner();
            let latency = started.elapsed();
            samples(recorded, "list_page").record(latency);
            pass.push(latency);
            shared.count_one();
            match listed.next_cursor {
                None => break true,
                Some(_) if shared.finished() => break false,
                Some(next) => cursor = Some(next),
            }
        };
        if complete {
            let tenth = (pass.len() / 10).max(1);
            for latency in &pass[..tenth.min(pass.len())] {
                samples(recorded, "list_page_first_tenth").record(*latency);
            }
            for latency in &pass[pass.len().saturating_sub(tenth)..] {
                samples(recorded, "list_page_last_tenth").record(*latency);
            }
        }
    }
    Ok(())
}

/// With `--rate`, each client paces itself to its share of it; without,
/// it goes as fast as it can.
struct Pace {
    gap: Option<Duration>,
    next: Instant,
}

impl Pace {
    fn new(shared: &Shared, index: usize) -> Self {
        let clients = shared.args.clients as f64;
        let gap = shared
            .args
            .rate
            .filter(|rate| *rate > 0.0)
            .map(|rate| Duration::from_secs_f64(clients / rate));
        // Clients start spread over one gap, so that together they send a
        // steady stream rather than a burst of `clients` calls every gap.
        let next =
            Instant::now() + gap.map_or(Duration::ZERO, |gap| gap.mul_f64(index as f64 / clients));
        Self { gap, next }
    }

    async fn wait(&mut self) {
        if let Some(gap) = self.gap {
            tokio::time::sleep_until(self.next.into()).await;
            self.next += gap;
        }
    }
}
