//! `taskstore status`'s part on governed dispatch: what waits, per tool,
//! and each key's running tasks against its limit, starts within its
//! rate's window, and pause.

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};

use super::output::write_table;
use crate::grpc::pb;

fn duration(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

fn until(t: Option<prost_types::Timestamp>) -> Option<String> {
    let t = t?;
    let at = chrono::DateTime::from_timestamp(t.seconds, u32::try_from(t.nanos).ok()?)?;
    Some(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
}

/// One line per tool with anything held back, then a row per key.
pub(super) fn write(out: &mut impl Write, tools: &[pb::ToolDispatchStatus]) -> std::io::Result<()> {
    if tools.is_empty() {
        return writeln!(out, "dispatch  nothing held back");
    }
    writeln!(out, "dispatch  held back by tool")?;
    for tool in tools {
        let oldest = Duration::from_secs(duration(tool.oldest_wait).as_secs());
        writeln!(
            out,
            "  {}: {} waiting (oldest for {})",
            tool.tool,
            tool.waiting,
            humantime::format_duration(oldest)
        )?;
        if tool.keys.is_empty() {
            continue;
        }
        let rows: Vec<[String; 5]> = tool
            .keys
            .iter()
            .map(|key| {
                [
                    format!(
                        "    {}",
                        if key.key.is_empty() {
                            "(whole tool)"
                        } else {
                            &key.key
                        }
                    ),
                    key.waiting.to_string(),
                    match key.max_running {
                        Some(max) => format!("{} of {max}", key.running),
                        None => "-".to_owned(),
                    },
                    key.started.to_string(),
                    until(key.paused_until).unwrap_or_else(|| "-".to_owned()),
                ]
            })
            .collect();
        let header = [
            "    KEY",
            "WAITING",
            "RUNNING",
            "STARTED IN WINDOW",
            "PAUSED UNTIL",
        ]
        .map(str::to_owned);
        write_table(out, &header, &rows)?;
    }
    Ok(())
}

/// The same, for `--json`.
pub(super) fn as_json(tools: &[pb::ToolDispatchStatus]) -> Value {
    tools
        .iter()
        .map(|tool| {
            json!({
                "tool": tool.tool,
                "waiting": tool.waiting,
                "oldestWaitMs": duration(tool.oldest_wait).as_millis() as u64,
                "keys": tool.keys.iter().map(|key| json!({
                    "key": key.key,
                    "waiting": key.waiting,
                    "running": key.running,
                    "maxRunning": key.max_running,
                    "started": key.started,
                    "pausedUntil": until(key.paused_until),
                })).collect::<Vec<_>>(),
            })
        })
        .collect()
}
