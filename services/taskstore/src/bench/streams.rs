//! `--scenario mcp-streams`: what open MCP streams cost the replica that
//! holds them, and what happens to them when it stops.
//!
//! 1. `--streams` sessions (`initialize`), tasks in `--active-sessions` of
//!    them; changes at `--rate` through `--endpoint` (gRPC) with no stream
//!    open: the baseline.
//! 2. One `GET /mcp` stream per session and `--listeners` 2026-07-28
//!    subscriptions on `--mcp-url`; the service's RSS before and after
//!    (`--service-pid`), its CPU with the streams idle, then the same
//!    changes at the same rate: CPU per stream and per delivered
//!    notification, change→receipt latency, and whether every change
//!    reached exactly the streams that follow its task.
//! 3. With `--failover-mcp-url`: the changes go on, the service is told to
//!    stop (SIGTERM); every stream should end with its position and a retry
//!    delay and come back on the other replica (`Last-Event-ID`, or
//!    listening again) with what it missed.

use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::drive::{self, Plan};
use super::listeners::{self, Context, Heard, Opened, phase};
use super::procfs::{self, Measured};
use super::stats::{Recorded, merge};
use super::tally::{Marks, Tally};
use super::{BenchError, Report, Shared};

/// The flags of `mcp-streams`.
#[derive(Debug, Clone, Args)]
pub struct StreamsArgs {
    /// `mcp-streams`: sessions, each with its `GET /mcp` stream open.
    #[arg(long, default_value_t = 500)]
    pub streams: usize,
    /// `mcp-streams`: 2026-07-28 `subscriptions/listen` streams besides,
    /// each naming the tasks of one active session.
    #[arg(long, default_value_t = 0)]
    pub listeners: usize,
    /// `mcp-streams`: sessions whose tasks change (the others' streams
    /// should hear nothing).
    #[arg(long, default_value_t = 50)]
    pub active_sessions: usize,
    /// `mcp-streams`: tasks in each active session.
    #[arg(long, default_value_t = 2)]
    pub tasks_per_session: usize,
    /// `mcp-streams`: the process serving `--mcp-url`, whose CPU time and
    /// memory are read from /proc (and which is stopped with
    /// `--failover-mcp-url`).
    #[arg(long)]
    pub service_pid: Option<u32>,
    /// `mcp-streams`: another replica's `/mcp`. After measuring, the
    /// service is told to stop (SIGTERM) and every stream should come back
    /// there.
    #[arg(long)]
    pub failover_mcp_url: Option<String>,
    /// `mcp-streams`: the process serving `--failover-mcp-url` (its memory
    /// is read before and after the streams come to it).
    #[arg(long)]
    pub failover_pid: Option<u32>,
    /// `mcp-streams`: append this many `"` to every status message (JSON
    /// doubles them): from ~3,800 on, a change no longer fits PostgreSQL's
    /// notification and every replica reads the task instead.
    #[arg(long, default_value_t = 0)]
    pub message_padding: usize,
}

/// Changes per second when `--rate` is not given.
const DEFAULT_RATE: f64 = 200.0;
/// Streams opened at once.
const OPENING: usize = 50;
/// How long the streams may take to show the last changes.
const SETTLE: Duration = Duration::from_secs(2);
/// How long every stream has to come back after its replica is told to stop.
const HANDOVER_WITHIN: Duration = Duration::from_secs(60);

/// What the service measured spent (`None` without `--service-pid`).
#[derive(Debug, Default, Clone, Serialize)]
pub struct Figures {
    pub streams: usize,
    pub listeners: usize,
    pub tasks: usize,
    pub rate_asked: f64,
    /// Changes per second made in the baseline and in the measured phase.
    pub rate_baseline: f64,
    pub rate_measured: f64,
    pub rss_kib_before_streams: Option<u64>,
    pub rss_kib_streams_open: Option<u64>,
    pub rss_kib_after_measured: Option<u64>,
    pub rss_kib_per_stream: Option<f64>,
    /// The service's CPU, ms per second: the changes with no stream open,
    /// the streams open with no change, the changes with the streams open.
    pub cpu_ms_per_s_baseline: Option<f64>,
    pub cpu_ms_per_s_idle_streams: Option<f64>,
    pub cpu_ms_per_s_streams: Option<f64>,
    /// (streams − baseline) per open stream, µs of CPU per second.
    pub cpu_us_per_s_per_stream: Option<f64>,
    /// (streams − baseline) per notification delivered, µs.
    pub cpu_us_per_notification: Option<f64>,
    /// (streams − baseline) per change and open stream, ns.
    pub cpu_ns_per_change_and_stream: Option<f64>,
    /// Notifications delivered per second in the measured phase.
    pub notifications_per_s: f64,
    /// The load generator's own CPU in the measured phase, ms per second.
    pub load_generator_cpu_ms_per_s: Option<f64>,
    pub handover: Option<Handover>,
    pub checks: Tally,
    /// Every must-be-zero check is zero.
    pub complete: bool,
}

/// The stop of the measured replica.
#[derive(Debug, Default, Clone, Serialize)]
pub struct Handover {
    /// From the stop signal: the last stream ended, the last stream was
    /// back on the other replica, the process exited.
    pub all_ended_ms: Option<f64>,
    pub all_back_ms: Option<f64>,
    pub exited_ms: Option<f64>,
    pub ended: usize,
    /// Streams whose last event carried a retry delay (session streams),
    /// subscriptions that ended with their result.
    pub ended_with_retry: usize,
    pub ended_with_result: usize,
    pub back: usize,
    /// … of which more than a second after the stop signal.
    pub back_later_than_1s: usize,
    /// The other replica's RSS before the streams came, with them, and
    /// after they were closed.
    pub rss_kib_failover_before: Option<u64>,
    pub rss_kib_failover_after: Option<u64>,
    pub rss_kib_failover_closed: Option<u64>,
}

pub(crate) async fn run(shared: Shared) -> Result<Report, BenchError> {
    let args = shared.args.clone();
    let flags = &args.streams;
    let url = args
        .mcp_url
        .clone()
        .ok_or_else(|| BenchError::Mcp("--scenario mcp-streams needs --mcp-url".into()))?;
    let rate = args.rate.filter(|r| *r > 0.0).unwrap_or(DEFAULT_RATE);
    let measured = flags.service_pid.and_then(Measured::new);
    let failover_pid = flags.failover_pid.and_then(Measured::new);
    let http = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .map_err(|err| BenchError::Mcp(err.to_string()))?;

    eprintln!("[bench] {} sessions", flags.streams);
    let sessions = initialize_all(&http, &url, flags.streams).await?;
    let plan = Arc::new(
        Plan::create(
            &shared,
            sessions,
            flags.active_sessions,
            flags.tasks_per_session,
        )
        .await?,
    );
    let mut tasks_of_session = vec![Vec::new(); plan.sessions.len()];
    for (index, task) in plan.tasks.iter().enumerate() {
        tasks_of_session[task.session].push(index);
    }
    let mut figures = Figures {
        streams: flags.streams,
        listeners: flags.listeners,
        tasks: plan.tasks.len(),
        rate_asked: rate,
        ..Figures::default()
    };
    let mut recorded = Recorded::new();

    eprintln!("[bench] baseline: {rate}/s changes, no stream open");
    let (made, cpu, _) = changes_for(&shared, &plan, rate, measured, None).await?;
    figures.rate_baseline = made.0;
    figures.cpu_ms_per_s_baseline = cpu;
    merge(&mut recorded, made.1);
    let before = plan.acked_now();

    let ctx = Arc::new(Context {
        http,
        plan: plan.clone(),
        phase: AtomicU8::new(phase::SETUP),
        delivered: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        stop_sent: OnceLock::new(),
        failover: flags.failover_mcp_url.clone(),
        close: CancellationToken::new(),
        ended: AtomicUsize::new(0),
        ended_with_retry: AtomicUsize::new(0),
        ended_with_result: AtomicUsize::new(0),
        back: AtomicUsize::new(0),
        back_late: AtomicUsize::new(0),
    });
    tokio::time::sleep(SETTLE).await;
    figures.rss_kib_before_streams = measured.and_then(|m| m.rss_kib());
    eprintln!(
        "[bench] opening {} session streams and {} subscriptions",
        flags.streams, flags.listeners
    );
    let opened = open_all(&ctx, &url, &tasks_of_session, flags.listeners).await?;
    let total = opened.len();
    let mut followers = tokio::task::JoinSet::new();
    for (index, one) in opened.into_iter().enumerate() {
        followers.spawn(listeners::follow(ctx.clone(), one, index));
    }
    tokio::time::sleep(SETTLE).await;
    figures.rss_kib_streams_open = measured.and_then(|m| m.rss_kib());
    figures.rss_kib_per_stream = figures
        .rss_kib_before_streams
        .zip(figures.rss_kib_streams_open)
        .map(|(before, open)| (open as f64 - before as f64) / total.max(1) as f64);
    let idle = measured.and_then(|m| m.cpu());
    tokio::time::sleep(args.duration.min(Duration::from_secs(10))).await;
    figures.cpu_ms_per_s_idle_streams = measured.zip(idle).and_then(|(m, at)| m.cpu_ms_per_s(at));

    eprintln!("[bench] measured: {rate}/s changes, {total} streams open");
    ctx.phase.store(phase::STEADY, Ordering::SeqCst);
    let started = Instant::now();
    let (made, cpu, own) = changes_for(&shared, &plan, rate, measured, procfs::own()).await?;
    tokio::time::sleep(SETTLE).await;
    let elapsed = started.elapsed();
    figures.rate_measured = made.0;
    figures.cpu_ms_per_s_streams = cpu;
    figures.load_generator_cpu_ms_per_s = own;
    merge(&mut recorded, made.1);
    let measured_marks = plan.acked_now();
    figures.rss_kib_after_measured = measured.and_then(|m| m.rss_kib());
    let delivered = ctx.delivered[usize::from(phase::STEADY)].load(Ordering::SeqCst);
    // Delivered over the changes' time (the settle only drains them).
    figures.notifications_per_s = delivered as f64 / (elapsed - SETTLE).as_secs_f64().max(1e-9);
    if let (Some(base), Some(with)) = (figures.cpu_ms_per_s_baseline, cpu) {
        let extra_us = (with - base) * 1000.0;
        figures.cpu_us_per_s_per_stream = Some(extra_us / total.max(1) as f64);
        figures.cpu_us_per_notification = Some(extra_us / figures.notifications_per_s.max(1e-9));
        figures.cpu_ns_per_change_and_stream =
            Some(extra_us * 1000.0 / (figures.rate_measured * total as f64).max(1e-9));
    }

    if let (Some(measured), Some(_)) = (measured, &flags.failover_mcp_url) {
        ctx.phase.store(phase::HANDOVER, Ordering::SeqCst);
        figures.handover =
            Some(handover(&shared, &plan, rate, &ctx, measured, failover_pid, total).await?);
    }
    let marks = Marks {
        before,
        measured: measured_marks,
        last: plan.acked_now(),
    };
    ctx.close.cancel();
    let heard: Vec<Heard> = followers.join_all().await;
    if let Some(handover) = &mut figures.handover {
        tokio::time::sleep(SETTLE).await;
        handover.rss_kib_failover_closed = failover_pid.and_then(|m| m.rss_kib());
    }
    for one in &heard {
        merge(&mut recorded, one.recorded.clone());
    }
    figures.checks = Tally::of(&heard, &tasks_of_session, &marks);
    figures.complete = figures.checks.complete();
    Ok(Report {
        scenario: args.scenario,
        clients: args.clients,
        elapsed_s: elapsed.as_secs_f64(),
        operations: recorded
            .into_iter()
            .map(|(name, samples)| (name, samples.summary(elapsed)))
            .collect(),
        streams: Some(figures),
        flood_left: None,
    })
}

/// Changes at `rate` for the run's duration; returns (rate made, update
/// latencies), the service's CPU ms/s, and `own`'s.
async fn changes_for(
    shared: &Shared,
    plan: &Arc<Plan>,
    rate: f64,
    measured: Option<Measured>,
    own: Option<Measured>,
) -> Result<((f64, Recorded), Option<f64>, Option<f64>), BenchError> {
    let stop = CancellationToken::new();
    let timer = {
        let (stop, duration) = (stop.clone(), shared.args.duration);
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            stop.cancel();
        })
    };
    let (cpu, own_cpu) = (measured.and_then(|m| m.cpu()), own.and_then(|m| m.cpu()));
    let counted: u64 = plan.acked_now().iter().sum();
    let started = Instant::now();
    let recorded = drive::changes(shared, plan, rate, stop).await?;
    let elapsed = started.elapsed().as_secs_f64().max(1e-9);
    let cpu = measured.zip(cpu).and_then(|(m, at)| m.cpu_ms_per_s(at));
    let own_cpu = own.zip(own_cpu).and_then(|(m, at)| m.cpu_ms_per_s(at));
    timer.abort();
    let made = plan.acked_now().iter().sum::<u64>() - counted;
    Ok(((made as f64 / elapsed, recorded), cpu, own_cpu))
}

async fn initialize_all(
    http: &reqwest::Client,
    url: &str,
    count: usize,
) -> Result<Vec<String>, BenchError> {
    let mut sessions = Vec::with_capacity(count);
    for chunk in (0..count).collect::<Vec<_>>().chunks(OPENING) {
        let mut starting = tokio::task::JoinSet::new();
        for _ in chunk {
            let (http, url) = (http.clone(), url.to_owned());
            starting.spawn(async move { super::mcp::initialize(&http, &url).await });
        }
        for session in starting.join_all().await {
            sessions.push(session?);
        }
    }
    Ok(sessions)
}

/// Every session's stream, then the subscriptions (each naming one active
/// session's tasks, in turn), `OPENING` at a time.
async fn open_all(
    ctx: &Arc<Context>,
    url: &str,
    tasks_of_session: &[Vec<usize>],
    listeners: usize,
) -> Result<Vec<Opened>, BenchError> {
    let active: Vec<&Vec<usize>> = tasks_of_session.iter().filter(|t| !t.is_empty()).collect();
    let mut opened = Vec::new();
    let count = tasks_of_session.len() + if active.is_empty() { 0 } else { listeners };
    for chunk in (0..count).collect::<Vec<_>>().chunks(OPENING) {
        let mut opening = tokio::task::JoinSet::new();
        for &index in chunk {
            let (ctx, url) = (ctx.clone(), url.to_owned());
            let listen = index
                .checked_sub(tasks_of_session.len())
                .map(|n| active[n % active.len()].clone());
            opening.spawn(async move {
                match listen {
                    None => listeners::open_session(&ctx, &url, index, None).await,
                    Some(tasks) => listeners::open_listen(&ctx, &url, index, tasks).await,
                }
            });
        }
        for one in opening.join_all().await {
            opened.push(one?);
        }
    }
    Ok(opened)
}

/// Stops the measured replica with the changes going on; waits for every
/// stream to be back on the other replica.
async fn handover(
    shared: &Shared,
    plan: &Arc<Plan>,
    rate: f64,
    ctx: &Arc<Context>,
    measured: Measured,
    failover: Option<Measured>,
    total: usize,
) -> Result<Handover, BenchError> {
    let stop = CancellationToken::new();
    let changing = {
        let (shared, plan, stop) = (shared.clone(), plan.clone(), stop.clone());
        tokio::spawn(async move { drive::changes(&shared, &plan, rate, stop).await })
    };
    let mut figures = Handover {
        rss_kib_failover_before: failover.and_then(|m| m.rss_kib()),
        ..Handover::default()
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    eprintln!("[bench] stopping the replica (SIGTERM), {total} streams open");
    let stopped = Instant::now();
    let _ = ctx.stop_sent.set(stopped);
    measured.terminate().map_err(BenchError::Mcp)?;
    let deadline = stopped + HANDOVER_WITHIN;
    while Instant::now() < deadline {
        let ended = ctx.ended.load(Ordering::SeqCst);
        if figures.all_ended_ms.is_none() && ended >= total {
            figures.all_ended_ms = Some(ms(stopped.elapsed()));
        }
        if figures.exited_ms.is_none() && measured.exited() {
            figures.exited_ms = Some(ms(stopped.elapsed()));
        }
        if ctx.back.load(Ordering::SeqCst) >= total {
            figures.all_back_ms = Some(ms(stopped.elapsed()));
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Changes go on a while on the other replica, then the last shows.
    tokio::time::sleep(SETTLE).await;
    stop.cancel();
    let _ = changing
        .await
        .map_err(|err| BenchError::Mcp(err.to_string()))??;
    tokio::time::sleep(SETTLE).await;
    while figures.exited_ms.is_none() && Instant::now() < deadline {
        if measured.exited() {
            figures.exited_ms = Some(ms(stopped.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    figures.ended = ctx.ended.load(Ordering::SeqCst);
    figures.ended_with_retry = ctx.ended_with_retry.load(Ordering::SeqCst);
    figures.ended_with_result = ctx.ended_with_result.load(Ordering::SeqCst);
    figures.back = ctx.back.load(Ordering::SeqCst);
    figures.back_later_than_1s = ctx.back_late.load(Ordering::SeqCst);
    figures.rss_kib_failover_after = failover.and_then(|m| m.rss_kib());
    Ok(figures)
}

fn ms(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1000.0
}
