//! The clients `mcp-streams` holds open: a 2025-11-25 session's `GET /mcp`
//! stream, and a 2026-07-28 `subscriptions/listen` naming some tasks. Each
//! notes every change it is told of (by the sequence number in the status
//! message), which tasks those were (its own or not), how late they came,
//! and, when its replica stops, when its stream ended and when it was back
//! on the other replica: a session stream with `Last-Event-ID`, a
//! subscription by listening again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::BenchError;
use super::drive::{Plan, parse_message, task_of_token};
use super::sse::{SseEvent, SseReader};
use super::stats::{Recorded, samples};
use super::walk::unix_micros;

/// When a session stream that ended is told no retry delay, it comes back
/// after this. (A subscription that ended with its result listens again
/// at once.)
const DEFAULT_RETRY: Duration = Duration::from_secs(1);

/// Where the run is: what a delivery's latency is recorded as.
pub(crate) mod phase {
    pub const SETUP: u8 = 0;
    pub const STEADY: u8 = 1;
    pub const HANDOVER: u8 = 2;
}

/// What every client shares.
#[derive(Debug)]
pub(crate) struct Context {
    pub http: reqwest::Client,
    pub plan: Arc<Plan>,
    pub phase: AtomicU8,
    /// Notifications delivered (every kind), by phase.
    pub delivered: [AtomicU64; 3],
    /// When the replica was told to stop.
    pub stop_sent: OnceLock<Instant>,
    /// The other replica's `/mcp`, where streams go when theirs stops.
    pub failover: Option<String>,
    pub close: CancellationToken,
    pub ended: AtomicUsize,
    pub ended_with_retry: AtomicUsize,
    /// Subscriptions that ended with their request's result.
    pub ended_with_result: AtomicUsize,
    pub back: AtomicUsize,
    /// Streams back on the other replica more than a second after the stop.
    pub back_late: AtomicUsize,
}

/// Which client it is.
#[derive(Debug, Clone)]
pub(crate) enum Kind {
    /// The session stream of session `n`.
    Session(usize),
    /// A subscription to these tasks.
    Listen(Vec<usize>),
}

/// What one client heard.
#[derive(Debug)]
pub(crate) struct Heard {
    pub kind: Kind,
    /// Per task: the changes shown, by sequence number, in arrival order.
    pub status: HashMap<usize, Vec<u64>>,
    pub progress: HashMap<usize, Vec<u64>>,
    /// Notifications about tasks this client must not be shown.
    pub foreign: u64,
    /// A subscription acknowledged other tasks than it named.
    pub ack_mismatch: u64,
    /// Messages of no expected shape (the first few).
    pub unexpected: Vec<String>,
    pub recorded: Recorded,
    /// Why it stopped before it was closed, if it did.
    pub failure: Option<String>,
}

impl Heard {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            status: HashMap::new(),
            progress: HashMap::new(),
            foreign: 0,
            ack_mismatch: 0,
            unexpected: Vec::new(),
            recorded: Recorded::new(),
            failure: None,
        }
    }

    fn unexpected(&mut self, message: &Value) {
        if self.unexpected.len() < 3 {
            self.unexpected.push(message.to_string());
        }
    }

    /// Whether task `task` is this client's to be shown.
    fn owns(&self, plan: &Plan, task: usize) -> bool {
        match &self.kind {
            Kind::Session(session) => plan.tasks[task].session == *session,
            Kind::Listen(tasks) => tasks.contains(&task),
        }
    }
}

/// An open stream, its first event read.
#[derive(Debug)]
pub(crate) struct Opened {
    pub reader: SseReader,
    pub kind: Kind,
    pub took: Duration,
}

/// Opens session `session`'s `GET /mcp` stream on `url` (after `last_id`).
pub(crate) async fn open_session(
    ctx: &Context,
    url: &str,
    session: usize,
    last_id: Option<&str>,
) -> Result<Opened, BenchError> {
    let started = Instant::now();
    let mut request = ctx
        .http
        .get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &ctx.plan.sessions[session]);
    if let Some(last_id) = last_id {
        request = request.header("last-event-id", last_id);
    }
    let reader = first_event(request, "GET /mcp").await?;
    Ok(Opened {
        reader,
        kind: Kind::Session(session),
        took: started.elapsed(),
    })
}

/// Subscribes to `tasks` on `url` (2026-07-28 `subscriptions/listen`).
pub(crate) async fn open_listen(
    ctx: &Context,
    url: &str,
    id: usize,
    tasks: Vec<usize>,
) -> Result<Opened, BenchError> {
    let started = Instant::now();
    let ids: Vec<&str> = tasks
        .iter()
        .map(|&t| ctx.plan.tasks[t].id.as_str())
        .collect();
    let body = json!({
        "jsonrpc": "2.0", "id": format!("sub-{id}"), "method": "subscriptions/listen",
        "params": {
            "notifications": {"taskIds": ids},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}},
            },
        },
    });
    let request = ctx
        .http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(&body);
    let reader = first_event(request, "subscriptions/listen").await?;
    Ok(Opened {
        reader,
        kind: Kind::Listen(tasks),
        took: started.elapsed(),
    })
}

/// Sends `request`, expects an event stream, and waits for its first
/// event (which stays unread: the priming event or the acknowledgement).
async fn first_event(
    request: reqwest::RequestBuilder,
    what: &str,
) -> Result<SseReader, BenchError> {
    let response = request
        .send()
        .await
        .map_err(|err| BenchError::Mcp(format!("{what}: {err}")))?;
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !response.status().is_success() || !kind.starts_with("text/event-stream") {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        return Err(BenchError::Mcp(format!("{what}: {status} {body}")));
    }
    let mut reader = SseReader::new(response);
    reader
        .peek()
        .await
        .map_err(|err| BenchError::Mcp(format!("{what}: {err}")))?;
    Ok(reader)
}

/// Reads `opened` until closed, following it to the other replica when its
/// own stops.
pub(crate) async fn follow(ctx: Arc<Context>, opened: Opened, index: usize) -> Heard {
    let mut heard = Heard::new(opened.kind.clone());
    samples(&mut heard.recorded, "stream_open").record(opened.took);
    let mut reader = opened.reader;
    let mut moved = false;
    let mut back_pending = false;
    loop {
        let next = tokio::select! {
            () = ctx.close.cancelled() => break,
            next = reader.next() => next,
        };
        let ended = match next {
            Ok(Some(event)) => {
                if std::mem::take(&mut back_pending) {
                    back(&ctx, &mut heard);
                }
                heard_event(&ctx, &mut heard, &event);
                continue;
            }
            Ok(None) => None,
            Err(err) => Some(err.to_string()),
        };
        if ctx.close.is_cancelled() {
            break;
        }
        // The stream ended.
        let Some(stopped) = ctx.stop_sent.get() else {
            heard.failure = Some(format!("ended before its replica stopped ({ended:?})"));
            break;
        };
        let failover = match (&ctx.failover, moved) {
            (Some(failover), false) => failover.clone(),
            _ => {
                heard.failure = Some(format!("ended on the other replica too ({ended:?})"));
                break;
            }
        };
        samples(&mut heard.recorded, "handover_ended").record(stopped.elapsed());
        ctx.ended.fetch_add(1, Ordering::SeqCst);
        if reader.retry.is_some() {
            ctx.ended_with_retry.fetch_add(1, Ordering::SeqCst);
        }
        let delay = match (&heard.kind, reader.retry) {
            (_, Some(retry)) => retry,
            (Kind::Session(_), None) => DEFAULT_RETRY,
            (Kind::Listen(_), None) => Duration::ZERO,
        };
        tokio::time::sleep(delay).await;
        let reopened = match &heard.kind {
            Kind::Session(session) => {
                let last = reader.last_id.clone();
                open_session(&ctx, &failover, *session, last.as_deref()).await
            }
            Kind::Listen(tasks) => open_listen(&ctx, &failover, index, tasks.clone()).await,
        };
        match reopened {
            Ok(opened) => {
                reader = opened.reader;
                moved = true;
                back_pending = true;
            }
            Err(err) => {
                heard.failure = Some(format!("could not come back: {err}"));
                break;
            }
        }
    }
    heard
}

/// Back on the other replica: its first event arrived.
fn back(ctx: &Context, heard: &mut Heard) {
    if let Some(stopped) = ctx.stop_sent.get() {
        samples(&mut heard.recorded, "handover_back").record(stopped.elapsed());
        if stopped.elapsed() > Duration::from_secs(1) {
            ctx.back_late.fetch_add(1, Ordering::SeqCst);
        }
    }
    ctx.back.fetch_add(1, Ordering::SeqCst);
}

fn heard_event(ctx: &Context, heard: &mut Heard, event: &SseEvent) {
    let Some(data) = &event.data else {
        return; // the priming event: a position only
    };
    let Ok(message) = serde_json::from_str::<Value>(data) else {
        heard.unexpected(&Value::String(data.clone()));
        return;
    };
    let plan = &ctx.plan;
    let params = &message["params"];
    let (task, seq_and_sent, progress) = match message["method"].as_str() {
        Some("notifications/tasks/status" | "notifications/tasks") => {
            let task = params["taskId"].as_str().and_then(|id| plan.by_id.get(id));
            (task.copied(), params["statusMessage"].as_str(), false)
        }
        Some("notifications/progress") => {
            let task = params["progressToken"].as_str().and_then(task_of_token);
            (task, params["message"].as_str(), true)
        }
        Some("notifications/subscriptions/acknowledged") => {
            acknowledged(plan, heard, params);
            return;
        }
        // The subscription's end (its request's result) as its replica stops.
        None if message.get("result").is_some() => {
            ctx.ended_with_result.fetch_add(1, Ordering::SeqCst);
            return;
        }
        _ => {
            heard.unexpected(&message);
            return;
        }
    };
    let phase = ctx.phase.load(Ordering::SeqCst);
    ctx.delivered[usize::from(phase)].fetch_add(1, Ordering::Relaxed);
    let Some(task) = task.filter(|&t| t < plan.tasks.len() && heard.owns(plan, t)) else {
        heard.foreign += 1;
        heard.unexpected(&message);
        return;
    };
    // A task's state before its first change has no sequence number.
    let Some((seq, sent)) = seq_and_sent.and_then(parse_message) else {
        return;
    };
    let by_task = if progress {
        &mut heard.progress
    } else {
        &mut heard.status
    };
    by_task.entry(task).or_default().push(seq);
    let name = match (phase, &heard.kind, progress) {
        // A subscription's first notifications: the tasks as they were.
        (phase::SETUP, ..) => return,
        (phase::STEADY, Kind::Session(_), false) => "stream_delivery",
        (phase::STEADY, Kind::Session(_), true) => "progress_delivery",
        (phase::STEADY, Kind::Listen(_), _) => "listen_delivery",
        _ => "handover_delivery",
    };
    samples(&mut heard.recorded, name).record_micros(unix_micros().saturating_sub(sent));
}

fn acknowledged(plan: &Plan, heard: &mut Heard, params: &Value) {
    let Kind::Listen(tasks) = &heard.kind else {
        heard.ack_mismatch += 1;
        return;
    };
    let acked: Vec<&str> = params["notifications"]["taskIds"]
        .as_array()
        .map(|ids| ids.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let named: Vec<&str> = tasks.iter().map(|&t| plan.tasks[t].id.as_str()).collect();
    if acked != named {
        heard.ack_mismatch += 1;
    }
}
