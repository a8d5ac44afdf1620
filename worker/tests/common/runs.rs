//! A command tool that records its own runs, and what its record says: how
//! many runs of a key overlapped at most. The proofs of a key's concurrency
//! limit read the tool's own start and end times, not the service's view.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::json;

/// Records `start <ns> <task> <arguments>` and `end <ns> <task>` around a
/// short sleep (appends of one short line each: atomic).
pub const RECORDING_SCRIPT: &str = r#"#!/bin/sh
read -r arguments
echo "start $(date +%s%N) $TASKSTORE_TASK_ID $arguments" >> "$RUNS_LOG"
sleep 0.3
echo "end $(date +%s%N) $TASKSTORE_TASK_ID" >> "$RUNS_LOG"
echo done
"#;

/// The recording tool `limited`, at most `limit` at once per
/// `arguments.customer`, in a directory of its own: the command-tools file
/// and the log its runs write.
pub struct RecordingTool {
    pub dir: PathBuf,
    pub tools_file: PathBuf,
    pub log: PathBuf,
}

impl RecordingTool {
    pub fn new(name: &str, limit: usize) -> Self {
        let dir = std::env::temp_dir().join(format!("taskworker-runs-{name}"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let script = dir.join("tool.sh");
        std::fs::write(&script, RECORDING_SCRIPT).expect("script");
        let log = dir.join("runs.log");
        let tools_file = dir.join("tools.json");
        std::fs::write(
            &tools_file,
            json!({"tools": {"limited": {
                "command": ["sh", script.to_str().expect("utf-8 path")],
                "env": {"RUNS_LOG": log.to_str().expect("utf-8 path")},
                "concurrency": {"max": limit, "key": "arguments.customer"},
            }}})
            .to_string(),
        )
        .expect("tools file");
        Self {
            dir,
            tools_file,
            log,
        }
    }

    /// What the log recorded.
    pub fn runs(&self, cut_short_at: u128) -> Runs {
        Runs::parse(
            &std::fs::read_to_string(&self.log).expect("runs log"),
            cut_short_at,
        )
    }

    pub fn tools_file(&self) -> &Path {
        &self.tools_file
    }
}

impl Drop for RecordingTool {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The runs a log recorded, as (customer, start, end) in nanoseconds.
pub struct Runs {
    pub runs: Vec<(String, u128, u128)>,
    /// How many started and never ended (their worker died).
    pub cut_short: usize,
    /// Every start, in order.
    pub started: usize,
}

impl Runs {
    /// A run whose end is missing is taken to end at `cut_short_at` (when
    /// its worker was killed), or at its start if that is later.
    pub fn parse(text: &str, cut_short_at: u128) -> Self {
        let mut starts: HashMap<(String, usize), (String, u128)> = HashMap::new();
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut runs = Vec::new();
        let mut started = 0;
        for line in text.lines() {
            let mut parts = line.splitn(4, ' ');
            let (kind, at, task) = (
                parts.next().unwrap_or_default(),
                parts
                    .next()
                    .and_then(|at| at.parse::<u128>().ok())
                    .expect("a time"),
                parts.next().unwrap_or_default().to_owned(),
            );
            match kind {
                "start" => {
                    let arguments: serde_json::Value =
                        serde_json::from_str(parts.next().unwrap_or("{}")).expect("arguments");
                    let customer = arguments["customer"].as_str().expect("customer").to_owned();
                    let n = seen.entry(task.clone()).or_default();
                    *n += 1;
                    starts.insert((task, *n), (customer, at));
                    started += 1;
                }
                "end" => {
                    let n = seen.get(&task).copied().unwrap_or_default();
                    if let Some((customer, start)) = starts.remove(&(task, n)) {
                        runs.push((customer, start, at));
                    }
                }
                other => panic!("unexpected line {other:?}"),
            }
        }
        let cut_short = starts.len();
        for (_, (customer, start)) in starts {
            runs.push((customer, start, cut_short_at.max(start)));
        }
        Self {
            runs,
            cut_short,
            started,
        }
    }

    /// The most runs of `customer` at once: a sweep over their starts and
    /// ends (an end before a start at the same instant).
    pub fn most_at_once(&self, customer: &str) -> i32 {
        let mut events: Vec<(u128, i32)> = self
            .runs
            .iter()
            .filter(|(c, _, _)| c == customer)
            .flat_map(|(_, start, end)| [(*start, 1), (*end, -1)])
            .collect();
        events.sort();
        let (mut running, mut most) = (0, 0);
        for (_, step) in events {
            running += step;
            most = most.max(running);
        }
        most
    }
}
