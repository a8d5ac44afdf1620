//! `taskstore status`: the service's health and its dependencies', as text
//! for people or JSON for scripts; exit status 8 when it runs degraded.

use std::io::Write;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::json;

use super::Connection;
use super::exit::{ClientError, Exit};
use super::output::{print_json, write_table};
use crate::config::ClientArgs;
use crate::domain::ToolName;
use crate::grpc::pb;

/// Due jobs older than this mean the relay is not keeping up.
const RELAY_LAG_LIMIT: Duration = Duration::from_secs(60);

/// How often `--wait` asks again.
const WAIT_STEP: Duration = Duration::from_millis(200);

/// What a healthy service has besides its dependencies.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    /// Workers serving these tools.
    pub(super) tools: Vec<ToolName>,
    /// At least one worker (unless the service only stores tasks).
    pub(super) workers: bool,
}

pub(super) async fn run(
    connection: &mut Connection,
    args: &ClientArgs,
    expected: &Expected,
    wait: Option<Duration>,
) -> Result<Exit, ClientError> {
    let deadline = wait.map(|wait| tokio::time::Instant::now() + wait);
    let (status, problems) = loop {
        let asked = ask(connection).await;
        let problems = match &asked {
            Ok(status) => problems(status, expected),
            Err(_) => Vec::new(),
        };
        let settled = asked.as_ref().is_ok_and(|_| problems.is_empty());
        match deadline {
            Some(deadline) if !settled && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(WAIT_STEP).await;
            }
            _ => break (asked?, problems),
        }
    };
    if args.json {
        print_json(&as_json(&connection.endpoint, &status, &problems))?;
    } else {
        print_text(&connection.endpoint, &status, &problems)?;
    }
    Ok(if problems.is_empty() {
        Exit::Done
    } else {
        Exit::Degraded
    })
}

/// The status, asked on a connection made (again) for the purpose: a
/// service that is still starting is not there on the first try.
async fn ask(connection: &mut Connection) -> Result<pb::GetStatusResponse, ClientError> {
    let asked = async { Ok::<_, ClientError>(connection.store().await?.status().await?) }.await;
    if asked.is_err() {
        connection.store = None;
    }
    asked
}

/// What makes the service degraded, in words.
fn problems(status: &pb::GetStatusResponse, expected: &Expected) -> Vec<String> {
    let mut problems = Vec::new();
    for tool in &expected.tools {
        match status.tools.iter().find(|served| served.name == tool.as_str()) {
            None => problems.push(format!("no worker serves tool {tool}")),
            Some(served) if served.consuming == 0 => problems.push(format!(
                "no worker of tool {tool} consumes its queue ({} cannot reach the job queue): its tasks wait",
                plural(served.workers, "worker")
            )),
            Some(_) => {}
        }
    }
    for tool in status.tools.iter().filter(|t| t.descriptions > 1) {
        problems.push(format!(
            "the workers of tool {} describe it {} different ways: calls may fail on some (see their descriptions under workers)",
            tool.name, tool.descriptions
        ));
    }
    if let Some(database) = status.database.as_ref().filter(|d| !d.healthy) {
        problems.push(format!("the database is unreachable: {}", database.error));
    }
    for (what, dependency) in [
        ("the database is", &status.database),
        ("the job queue is", &status.queue),
    ] {
        if let Some(dependency) = dependency.as_ref().filter(|d| !d.condition.is_empty()) {
            let since = age(time(dependency.condition_since));
            problems.push(match since {
                Some(since) => format!("{what} {} for {since}", dependency.condition),
                None => format!("{what} {}", dependency.condition),
            });
        }
    }
    if let Some(queue) = status.queue.as_ref().filter(|q| !q.healthy) {
        problems.push(format!(
            "the job queue is unreachable ({}); new tasks wait in the outbox",
            queue.error
        ));
    }
    if let Some(outbox) = &status.outbox {
        let lag = duration(outbox.oldest_due_age);
        if lag > RELAY_LAG_LIMIT {
            problems.push(format!(
                "the oldest due job has waited {} to be relayed",
                humantime::format_duration(whole_seconds(lag))
            ));
        }
    }
    // Last: a dependency that is down explains more than this does.
    if expected.workers && status.workers.is_empty() {
        problems.push(
            "no worker is reporting, so no dispatched task can run: start taskworker (or, for a \
             service that only stores tasks, pass --without-workers)"
                .to_owned(),
        );
    }
    problems
}

fn duration(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

fn time(t: Option<prost_types::Timestamp>) -> Option<DateTime<Utc>> {
    let t = t?;
    DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?)
}

fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// How long ago `at` was (`19s`), if known.
fn age(at: Option<DateTime<Utc>>) -> Option<String> {
    let age = (Utc::now() - at?).to_std().ok()?;
    Some(humantime::format_duration(whole_seconds(age)).to_string())
}

fn ago(at: Option<DateTime<Utc>>) -> String {
    age(at).map_or_else(|| "-".to_owned(), |age| format!("{age} ago"))
}

fn millis(d: Option<prost_types::Duration>) -> f64 {
    duration(d).as_secs_f64() * 1000.0
}

fn dependency(state: Option<&pb::DependencyStatus>) -> String {
    match state {
        Some(state) if state.healthy && !state.condition.is_empty() => format!(
            "DEGRADED for {}: {}",
            age(time(state.condition_since)).unwrap_or_else(|| "-".to_owned()),
            state.condition
        ),
        Some(state) if state.healthy => match &state.latency {
            Some(latency) => format!("ok ({:.1} ms)", millis(Some(*latency))),
            None => format!("ok (since {})", ago(time(state.since))),
        },
        Some(state) => match age(time(state.since)) {
            Some(age) => format!("DOWN for {age}: {}", state.error),
            None => format!("DOWN: {}", state.error),
        },
        None => "unknown".to_owned(),
    }
}

fn print_text(
    endpoint: &str,
    status: &pb::GetStatusResponse,
    problems: &[String],
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(
        out,
        "service   {endpoint} (taskstore {}, {} store)",
        status.version, status.backend
    )?;
    writeln!(out, "database  {}", dependency(status.database.as_ref()))?;
    writeln!(
        out,
        "queue     {}: {}",
        status.queue_kind,
        dependency(status.queue.as_ref())
    )?;
    match &status.outbox {
        Some(outbox) => writeln!(
            out,
            "outbox    {} jobs waiting, {} due (oldest due for {})",
            outbox.jobs,
            outbox.due,
            humantime::format_duration(whole_seconds(duration(outbox.oldest_due_age)))
        )?,
        None => writeln!(out, "outbox    unknown (the database is unreachable)")?,
    }
    writeln!(out, "workers   {} reporting", status.workers.len())?;
    if !status.workers.is_empty() {
        let rows: Vec<[String; 7]> = status
            .workers
            .iter()
            .map(|w| {
                [
                    format!("  {}", w.worker_id),
                    w.tools.join(","),
                    if w.reach.is_empty() {
                        "*".to_owned()
                    } else {
                        w.reach.clone()
                    },
                    if w.consuming { "yes" } else { "NO" }.to_owned(),
                    w.slots.to_string(),
                    w.busy.to_string(),
                    ago(time(w.last_seen_at)),
                ]
            })
            .collect();
        let header = [
            "  WORKER",
            "TOOLS",
            "TENANTS",
            "CONSUMING",
            "SLOTS",
            "BUSY",
            "LAST SEEN",
        ]
        .map(str::to_owned);
        write_table(&mut out, &header, &rows)?;
        for worker in &status.workers {
            for (tool, said) in &worker.differing_descriptions {
                writeln!(out, "  {} describes {tool}: {said}", worker.worker_id)?;
            }
        }
    }
    writeln!(out, "tools     {} served", status.tools.len())?;
    if !status.tools.is_empty() {
        let rows: Vec<[String; 5]> = status
            .tools
            .iter()
            .map(|t| {
                [
                    format!("  {}", t.name),
                    t.workers.to_string(),
                    t.consuming.to_string(),
                    t.slots.to_string(),
                    t.busy.to_string(),
                ]
            })
            .collect();
        let header = ["  TOOL", "WORKERS", "CONSUMING", "SLOTS", "BUSY"].map(str::to_owned);
        write_table(&mut out, &header, &rows)?;
    }
    super::status_dispatch::write(&mut out, &status.dispatch)?;
    if problems.is_empty() {
        writeln!(out, "health    ok")
    } else {
        writeln!(out, "health    DEGRADED: {}", problems.join("; "))
    }
}

fn as_json(
    endpoint: &str,
    status: &pb::GetStatusResponse,
    problems: &[String],
) -> serde_json::Value {
    let dependency = |state: Option<&pb::DependencyStatus>| {
        state.map(|state| {
            json!({
                "healthy": state.healthy,
                "since": time(state.since),
                "error": (!state.error.is_empty()).then_some(&state.error),
                "latencyMs": state.latency.map(|l| millis(Some(l))),
                "condition": (!state.condition.is_empty()).then_some(&state.condition),
                "conditionSince": time(state.condition_since),
            })
        })
    };
    json!({
        "endpoint": endpoint,
        "version": status.version,
        "backend": status.backend,
        "healthy": problems.is_empty(),
        "problems": problems,
        "database": dependency(status.database.as_ref()),
        "queue": {
            "kind": status.queue_kind,
            "state": dependency(status.queue.as_ref()),
        },
        "outbox": status.outbox.as_ref().map(|o| json!({
            "jobs": o.jobs,
            "due": o.due,
            "oldestDueAgeMs": millis(o.oldest_due_age),
        })),
        "workers": status.workers.iter().map(|w| json!({
            "workerId": w.worker_id,
            "tools": w.tools,
            "tenants": w.reach,
            "consuming": w.consuming,
            "differingDescriptions": w.differing_descriptions,
            "slots": w.slots,
            "busy": w.busy,
            "firstSeenAt": time(w.first_seen_at),
            "lastSeenAt": time(w.last_seen_at),
        })).collect::<Vec<_>>(),
        "tools": status.tools.iter().map(|t| json!({
            "name": t.name,
            "workers": t.workers,
            "consuming": t.consuming,
            "descriptions": t.descriptions,
            "slots": t.slots,
            "busy": t.busy,
            "lastSeenAt": time(t.last_seen_at),
        })).collect::<Vec<_>>(),
        "dispatch": super::status_dispatch::as_json(&status.dispatch),
    })
}

/// `n thing` or `n things`.
fn plural(n: u32, thing: &str) -> String {
    if n == 1 {
        format!("{n} {thing}")
    } else {
        format!("{n} {thing}s")
    }
}
