//! What each client does, per scenario.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use taskstore_proto::v1 as pb;

use super::stats::{Recorded, Samples};
use super::{BenchError, Scenario, Shared};

/// What `prepare` made before measuring (the task ids for `get`).
#[derive(Debug, Clone, Default)]
pub(crate) struct Prepared {
    pub task_ids: Arc<Vec<String>>,
    /// `get --seeded`: read `bench-1` … `bench-<seeded>` instead.
    pub seeded: u64,
    /// `watch`: the first this many of `task_ids` have a stream open.
    pub watched: usize,
}

const PAGE_SIZE: u32 = 100;

fn create_request(tool: Option<&str>, index: u64) -> pb::CreateTaskRequest {
    let request = serde_json::json!({
        "jsonrpc": "2.0", "id": index, "method": "tools/call",
        "params": { "name": tool.unwrap_or("bench"), "arguments": { "n": index } },
    });
    pb::CreateTaskRequest {
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: index.to_string(),
        request_json: request.to_string(),
        dispatch: tool.map(|_| pb::Dispatch {
            tool: None,
            max_attempts: None,
        }),
    }
}

/// Creates the tasks `get` and `list` read, with every client at once.
pub(crate) async fn prepare(shared: &Shared) -> Result<Prepared, BenchError> {
    if !matches!(
        shared.args.scenario,
        Scenario::Get | Scenario::List | Scenario::Watch
    ) {
        return Ok(Prepared::default());
    }
    if let (Scenario::Get, Some(seeded)) = (shared.args.scenario, shared.args.seeded) {
        return Ok(Prepared {
            task_ids: Arc::new(Vec::new()),
            seeded,
            watched: 0,
        });
    }
    let total = shared.args.tasks;
    let clients = shared.args.clients.max(1) as u64;
    eprintln!("[bench] creating {total} tasks first");
    let mut creators = tokio::task::JoinSet::new();
    for index in 0..clients {
        let mut client = shared.client(index as usize);
        creators.spawn(async move {
            let mut ids = Vec::new();
            let mut n = index;
            while n < total {
                let task = client
                    .create_task(create_request(None, n))
                    .await?
                    .into_inner();
                ids.push(task.task_id);
                n += clients;
            }
            Ok::<_, BenchError>(ids)
        });
    }
    let mut ids = Vec::new();
    for created in creators.join_all().await {
        ids.extend(created?);
    }
    Ok(Prepared {
        seeded: 0,
        watched: if shared.args.scenario == Scenario::Watch {
            shared.args.watchers.min(ids.len())
        } else {
            0
        },
        task_ids: Arc::new(ids),
    })
}

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
    }
    Ok(recorded)
}

pub(crate) fn samples<'a>(recorded: &'a mut Recorded, name: &'static str) -> &'a mut Samples {
    recorded.entry(name).or_default()
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
    while !shared.finished() {
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

/// A cheap per-client pseudo-random walk (xorshift) over what clients read,
/// so that they do not all hit the same rows in the same order.
pub(crate) struct Walk(u64);

impl Walk {
    pub(crate) fn new(client: usize) -> Self {
        Self(0x9E37_79B9_7F4A_7C15 ^ (client as u64 + 1))
    }

    /// The next pick in `0..n` (`n` > 0).
    pub(crate) fn next_below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn is_terminal(status: i32) -> bool {
    matches!(
        pb::TaskStatus::try_from(status),
        Ok(pb::TaskStatus::Completed | pb::TaskStatus::Failed | pb::TaskStatus::Cancelled)
    )
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
            if is_terminal(polled.status) {
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

pub(crate) fn unix_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

async fn e2e(shared: &Shared, index: usize, recorded: &mut Recorded) -> Result<(), BenchError> {
    let mut client = shared.client(index);
    let mut n = index as u64;
    // With a rate, each client paces itself to its share of it.
    let gap = shared
        .args
        .rate
        .filter(|rate| *rate > 0.0)
        .map(|rate| Duration::from_secs_f64(shared.args.clients as f64 / rate));
    // Clients start spread over one gap, so that together they send a steady
    // stream rather than a burst of `clients` creates every gap.
    let mut next = Instant::now()
        + gap.map_or(Duration::ZERO, |gap| {
            gap.mul_f64(index as f64 / shared.args.clients as f64)
        });
    while !shared.finished() {
        if let Some(gap) = gap {
            tokio::time::sleep_until(next.into()).await;
            next += gap;
        }
        let sent_us = unix_micros();
        let begun = Instant::now();
        let task = client
            .create_task(create_request(Some(&shared.args.tool), n))
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
