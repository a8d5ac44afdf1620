//! `taskstore bench`: a load generator that drives a running service over
//! gRPC with N concurrent clients and reports throughput and latency
//! percentiles per operation (progress on stderr, JSON on stdout). The
//! PostgreSQL baseline it is compared with lives in `benches/`.

mod drive;
mod fairness;
mod listeners;
mod mcp;
mod prepare;
mod procfs;
mod scenarios;
mod sse;
mod stats;
mod streams;
mod tally;
mod walk;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde::Serialize;
use taskstore_proto::v1 as pb;
use tonic::transport::{Channel, Endpoint};

use self::stats::{Recorded, Summary, merge};

/// What to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// CreateTask only (store only, no dispatch).
    Create,
    /// GetTask on existing tasks.
    Get,
    /// The MCP client pattern: create (dispatched), poll GetTask, fetch the result.
    Poll,
    /// CreateTask with dispatch until every result is stored.
    E2e,
    /// ListTasks paging through a large table.
    List,
    /// Tasks in flight and open WatchTask streams; measures how fast an
    /// update reaches its watcher.
    Watch,
    /// Synchronous MCP `tools/call`s of `--tool` through `--mcp-url`.
    McpCall,
    /// Open MCP streams on `--mcp-url` (session `GET /mcp` streams and
    /// 2026-07-28 subscriptions) while tasks change at `--rate` through
    /// `--endpoint`: the service's memory and CPU per stream, delivery
    /// latency and completeness, and its stop (`streams.rs`).
    McpStreams,
    /// The noisy neighbour: a tenant's `--flood`, then each client a quiet
    /// tenant creating at its share of `--rate` (`fairness.rs`).
    Fairness,
    /// CreateTask dispatched to `--tool` (with `--sleep-ms`), not waiting
    /// for results: fills the workers with running tasks (`--count`).
    Fill,
}

#[derive(Debug, Clone, Args)]
pub struct BenchArgs {
    /// The taskstore service to drive.
    #[arg(
        long,
        env = "TASKSTORE_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    pub endpoint: String,
    #[arg(long, value_enum)]
    pub scenario: Scenario,
    /// Concurrent clients.
    #[arg(long, default_value_t = 64)]
    pub clients: usize,
    /// How long to measure.
    #[arg(long, default_value = "10s", value_parser = crate::durations::parse_duration)]
    pub duration: Duration,
    /// Stop after this many operations instead (whichever comes first).
    #[arg(long)]
    pub count: Option<u64>,
    /// Tasks created before measuring `get`, `list` and `watch`.
    #[arg(long, default_value_t = 10_000)]
    pub tasks: u64,
    /// `get`: read the tasks `bench-1` … `bench-N` that
    /// `benches/pgbench/seed.sql` wrote (the rows pgbench reads) instead of
    /// creating `--tasks` first.
    #[arg(long)]
    pub seeded: Option<u64>,
    /// `watch`: WatchTask streams held open (one per task).
    #[arg(long, default_value_t = 1_000)]
    pub watchers: usize,
    /// The tool `poll` and `e2e` dispatch to (a no-op by default).
    #[arg(long, default_value = "noop")]
    pub tool: String,
    /// `e2e`: creates per second across all clients, `get`: reads per
    /// second (default: as fast as possible); `fairness`: the quiet
    /// tenants' creates per second.
    #[arg(long)]
    pub rate: Option<f64>,
    /// `fairness`: the tasks tenant `noisy` creates before the clock starts.
    #[arg(long)]
    pub flood: Option<u64>,
    /// HTTP/2 connections the clients share.
    #[arg(long, default_value_t = 4)]
    pub connections: usize,
    /// `poll`: the poll interval (default: the one the service advises).
    #[arg(long, value_parser = crate::durations::parse_duration)]
    pub poll_interval: Option<Duration>,
    /// `e2e` with `--tool sleep`: each task sleeps a duration spread evenly
    /// over this range of milliseconds, e.g. `50..500` (a mix of slow
    /// tools); the report's `tool_run` is what the tools were asked to run.
    #[arg(long, value_parser = MsRange::parse)]
    pub sleep_ms: Option<MsRange>,
    /// `mcp-call`, `mcp-streams`: the MCP endpoint, e.g.
    /// http://127.0.0.1:50052/mcp.
    #[arg(long)]
    pub mcp_url: Option<String>,
    #[command(flatten)]
    pub streams: streams::StreamsArgs,
}

/// A range of milliseconds, `LO..HI` (both included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsRange {
    pub lo: u64,
    pub hi: u64,
}

impl MsRange {
    fn parse(raw: &str) -> Result<Self, String> {
        let bad = || format!("{raw:?} is not a range of milliseconds such as 50..500");
        let (lo, hi) = raw.split_once("..").ok_or_else(bad)?;
        let (lo, hi) = (
            lo.trim().parse().map_err(|_| bad())?,
            hi.trim().parse().map_err(|_| bad())?,
        );
        if lo > hi {
            return Err(bad());
        }
        Ok(Self { lo, hi })
    }

    /// Task `index`'s duration: consecutive tasks spread over the range.
    pub fn for_task(self, index: u64) -> u64 {
        self.lo + index.wrapping_mul(7919) % (self.hi - self.lo).saturating_add(1)
    }
}

/// The JSON report.
#[derive(Debug, Serialize)]
pub struct Report {
    pub scenario: Scenario,
    pub clients: usize,
    pub elapsed_s: f64,
    pub operations: std::collections::BTreeMap<&'static str, Summary>,
    /// `mcp-streams`: what the streams cost and whether they were complete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub streams: Option<streams::Figures>,
    /// `fairness`: the flood's tasks still unfinished when the run ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flood_left: Option<u64>,
}

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("cannot reach {0}: {1}")]
    Connect(String, tonic::transport::Error),
    #[error("the service refused a request: {0}")]
    Rpc(#[from] tonic::Status),
    #[error("a WatchTask stream ended while its task was still running")]
    StreamEnded,
    #[error("mcp: {0}")]
    Mcp(String),
}

/// What every client shares.
#[derive(Debug, Clone)]
pub(crate) struct Shared {
    pub args: Arc<BenchArgs>,
    pub channels: Arc<Vec<Channel>>,
    pub deadline: Instant,
    pub done: Arc<AtomicU64>,
}

impl Shared {
    pub fn client(&self, index: usize) -> pb::task_store_client::TaskStoreClient<Channel> {
        let channel = self.channels[index % self.channels.len()].clone();
        pb::task_store_client::TaskStoreClient::new(channel)
            .max_decoding_message_size(64 * 1024 * 1024)
    }

    /// Whether the run is over (time or count).
    pub fn finished(&self) -> bool {
        Instant::now() >= self.deadline
            || self
                .args
                .count
                .is_some_and(|count| self.done.load(Ordering::Relaxed) >= count)
    }

    pub fn count_one(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }
}

pub async fn run(args: BenchArgs) -> Result<Report, BenchError> {
    let mut channels = Vec::new();
    for _ in 0..args.connections.max(1) {
        let channel = Endpoint::from_shared(args.endpoint.clone())
            .map_err(|err| BenchError::Connect(args.endpoint.clone(), err))?
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(|err| BenchError::Connect(args.endpoint.clone(), err))?;
        channels.push(channel);
    }
    let args = Arc::new(args);
    let setup = Shared {
        args: args.clone(),
        channels: Arc::new(channels),
        deadline: Instant::now() + Duration::from_secs(3600),
        done: Arc::new(AtomicU64::new(0)),
    };
    if args.scenario == Scenario::McpStreams {
        return streams::run(setup).await;
    }
    let prepared = prepare::prepare(&setup).await?;
    let flood = match args.scenario {
        Scenario::Fairness => Some(fairness::flood(&setup).await?),
        _ => None,
    };
    let watchers = match args.scenario {
        Scenario::Watch => {
            Some(watch::Watchers::open(&setup, &prepared.task_ids[..prepared.watched]).await?)
        }
        _ => None,
    };

    let started = Instant::now();
    let shared = Shared {
        deadline: started + args.duration,
        done: Arc::new(AtomicU64::new(0)),
        ..setup
    };
    let progress = tokio::spawn(progress(shared.clone(), started));
    let mut clients = tokio::task::JoinSet::new();
    for index in 0..args.clients.max(1) {
        let (shared, prepared) = (shared.clone(), prepared.clone());
        clients.spawn(async move { scenarios::client(shared, prepared, index).await });
    }
    let mut recorded = Recorded::new();
    for outcome in clients.join_all().await {
        merge(&mut recorded, outcome?);
    }
    let elapsed = started.elapsed();
    if let Some(watchers) = watchers {
        merge(&mut recorded, watchers.close().await?);
    }
    progress.abort();
    eprintln!();
    let flood_left = match &flood {
        Some(ids) => Some(fairness::flood_left(&shared, ids).await?),
        None => None,
    };
    Ok(Report {
        scenario: args.scenario,
        clients: args.clients,
        elapsed_s: elapsed.as_secs_f64(),
        operations: recorded
            .into_iter()
            .map(|(name, samples)| (name, samples.summary(elapsed)))
            .collect(),
        streams: None,
        flood_left,
    })
}

/// A progress line on stderr once a second.
async fn progress(shared: Shared, started: Instant) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    loop {
        ticker.tick().await;
        let done = shared.done.load(Ordering::Relaxed);
        let elapsed = started.elapsed().as_secs_f64();
        eprint!(
            "\r[bench {:?}] {elapsed:5.1}s  {done} operations  {:.0}/s   ",
            shared.args.scenario,
            done as f64 / elapsed.max(1e-9)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::MsRange;

    #[test]
    fn sleep_ranges_parse_and_spread_over_their_bounds() {
        let range = MsRange::parse("50..500").expect("a range");
        assert_eq!(range, MsRange { lo: 50, hi: 500 });
        let picks: Vec<u64> = (0..10_000).map(|n| range.for_task(n)).collect();
        assert!(picks.iter().all(|ms| (50..=500).contains(ms)));
        let mean = picks.iter().sum::<u64>() as f64 / picks.len() as f64;
        assert!((mean - 275.0).abs() < 5.0, "mean {mean}");
        assert_eq!(MsRange::parse("7..7").expect("one value").for_task(99), 7);
        let widest = MsRange::parse("0..18446744073709551615").expect("the widest range");
        let _ = widest.for_task(u64::MAX);
        for bad in [
            "500..50",
            "50-500",
            "..500",
            "a..b",
            "",
            "50..18446744073709551616",
        ] {
            assert!(MsRange::parse(bad).is_err(), "{bad:?} accepted");
        }
    }
}
