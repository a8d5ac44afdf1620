//! The worker fleet as the service sees it: workers report themselves and
//! the tools they serve every few seconds, and "what is served now" is
//! derived from the reports that are recent enough.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::execution::ToolName;
use super::ids::InvalidId;
use super::tools::ToolDescription;

/// How often workers report, and how long a report counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FleetPolicy {
    /// The interval the service asks workers to report at.
    pub heartbeat_interval: Duration,
    /// A worker whose last report is older than this is no longer counted:
    /// three missed reports, so one slow report does not hide a worker.
    pub seen_within: Duration,
}

impl Default for FleetPolicy {
    fn default() -> Self {
        Self {
            heartbeat_interval: Duration::from_secs(10),
            seen_within: Duration::from_secs(30),
        }
    }
}

/// A worker's name: 1 to 256 bytes of UTF-8 without control characters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerId(String);

impl WorkerId {
    pub const MAX_BYTES: usize = 256;

    pub fn parse(raw: &str) -> Result<Self, InvalidId> {
        if raw.is_empty() || raw.len() > Self::MAX_BYTES {
            return Err(InvalidId("must be 1 to 256 bytes"));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidId("must not contain control characters"));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// What a worker reports about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerHeartbeat {
    pub worker_id: WorkerId,
    /// Sorted, without repeats.
    pub tools: Vec<ToolName>,
    /// Attempts it runs at once, and how many run now.
    pub slots: u32,
    pub busy: u32,
    /// What its tools are, for those it described (at most one per tool,
    /// each one of `tools`), by name.
    pub descriptions: Vec<ToolDescription>,
}

impl WorkerHeartbeat {
    /// The most tools one worker may report (a bound on the row it writes).
    pub const MAX_TOOLS: usize = 1000;

    pub fn new(worker_id: WorkerId, tools: Vec<ToolName>, slots: u32, busy: u32) -> Self {
        let mut tools = tools;
        tools.sort();
        tools.dedup();
        Self {
            worker_id,
            tools,
            slots,
            busy: busy.min(slots),
            descriptions: Vec::new(),
        }
    }

    /// With the descriptions of its tools: those of tools it does not
    /// serve are dropped, and the first of repeated ones kept.
    pub fn with_descriptions(mut self, descriptions: Vec<ToolDescription>) -> Self {
        let mut kept: Vec<ToolDescription> = descriptions
            .into_iter()
            .filter(|d| self.tools.binary_search(&d.name).is_ok())
            .collect();
        kept.sort_by(|a, b| a.name.cmp(&b.name));
        kept.dedup_by(|later, first| later.name == first.name);
        self.descriptions = kept;
        self
    }

    /// The description this worker gave `tool`, if any.
    pub fn description_of(&self, tool: &ToolName) -> Option<&ToolDescription> {
        self.descriptions
            .binary_search_by(|d| d.name.cmp(tool))
            .ok()
            .map(|at| &self.descriptions[at])
    }
}

/// A worker as the registry knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    pub heartbeat: WorkerHeartbeat,
    pub first_seen_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
}

/// A tool and the workers that serve it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServedTool {
    pub name: ToolName,
    pub workers: u32,
    pub slots: u32,
    pub busy: u32,
    pub last_seen_at: DateTime<Utc>,
    /// What the tool is, as the latest worker that described it says (an
    /// undescribed tool takes any arguments, task optional).
    pub description: ToolDescription,
}

/// The tools `workers` serve, by name.
pub fn served_tools(workers: &[WorkerInfo]) -> Vec<ServedTool> {
    let mut tools: BTreeMap<&ToolName, ServedTool> = BTreeMap::new();
    // Whose description of each tool is listed: the worker that started
    // last (then the greatest id), so that while workers of two versions
    // report during a rollout, the new version's description is listed
    // steadily rather than whichever reported last.
    let mut described_by: BTreeMap<&ToolName, (DateTime<Utc>, &WorkerId)> = BTreeMap::new();
    for worker in workers {
        let report = &worker.heartbeat;
        for name in &report.tools {
            let tool = tools.entry(name).or_insert_with(|| ServedTool {
                name: name.clone(),
                workers: 0,
                slots: 0,
                busy: 0,
                last_seen_at: worker.last_seen_at,
                description: ToolDescription::undescribed(name.clone()),
            });
            tool.workers += 1;
            tool.slots = tool.slots.saturating_add(report.slots);
            tool.busy = tool.busy.saturating_add(report.busy);
            tool.last_seen_at = tool.last_seen_at.max(worker.last_seen_at);
            let newer = (worker.first_seen_at, &report.worker_id);
            if let Some(description) = report.description_of(name)
                && described_by.get(name).is_none_or(|known| *known < newer)
            {
                described_by.insert(name, newer);
                tool.description = description.clone();
            }
        }
    }
    tools.into_values().collect()
}

/// Jobs in the outbox: committed, not yet in the queue.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutboxBacklog {
    /// Every job, including those held back (retry backoff, no worker).
    pub jobs: u64,
    /// Jobs due now.
    pub due: u64,
    /// How long the oldest due job has been due.
    pub oldest_due_age: Duration,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str) -> ToolName {
        ToolName::parse(name).expect("tool name")
    }

    fn worker(id: &str, tools: &[&str], slots: u32, busy: u32, seen_us: i64) -> WorkerInfo {
        let at = DateTime::from_timestamp_micros(seen_us).expect("time");
        WorkerInfo {
            heartbeat: WorkerHeartbeat::new(
                WorkerId::parse(id).expect("id"),
                tools.iter().map(|t| tool(t)).collect(),
                slots,
                busy,
            ),
            first_seen_at: at,
            last_seen_at: at,
        }
    }

    #[test]
    fn tools_add_up_their_workers() {
        let served = served_tools(&[
            worker("a", &["echo", "sleep"], 4, 1, 10),
            worker("b", &["echo"], 2, 2, 20),
        ]);
        assert_eq!(
            served,
            [
                ServedTool {
                    name: tool("echo"),
                    workers: 2,
                    slots: 6,
                    busy: 3,
                    last_seen_at: DateTime::from_timestamp_micros(20).expect("time"),
                    description: ToolDescription::undescribed(tool("echo")),
                },
                ServedTool {
                    name: tool("sleep"),
                    workers: 1,
                    slots: 4,
                    busy: 1,
                    last_seen_at: DateTime::from_timestamp_micros(10).expect("time"),
                    description: ToolDescription::undescribed(tool("sleep")),
                },
            ]
        );
        assert!(served_tools(&[]).is_empty());
    }

    fn described(name: &str, text: &str) -> ToolDescription {
        ToolDescription::parse(
            tool(name),
            "",
            text,
            "",
            crate::domain::TaskSupport::Required,
        )
        .expect("description")
    }

    #[test]
    fn the_newest_workers_description_of_a_tool_wins() {
        let mut old = worker("old", &["echo"], 1, 0, 10);
        old.heartbeat = old
            .heartbeat
            .with_descriptions(vec![described("echo", "v1")]);
        let mut new = worker("new", &["echo", "sleep"], 1, 0, 20);
        new.heartbeat = new.heartbeat.with_descriptions(vec![
            described("echo", "v2"),
            described("echo", "repeated: dropped"),
            described("hash", "not served: dropped"),
        ]);
        assert_eq!(new.heartbeat.descriptions.len(), 1);
        let bare = worker("bare", &["echo"], 1, 0, 30);
        // The old worker reported last: its description still loses to the
        // one of the worker that started after it.
        old.last_seen_at = DateTime::from_timestamp_micros(99).expect("time");
        for order in [[&old, &new, &bare], [&bare, &new, &old]] {
            let served = served_tools(&order.map(Clone::clone));
            assert_eq!(served[0].description.description.as_deref(), Some("v2"));
            assert_eq!(
                served[1].description,
                ToolDescription::undescribed(tool("sleep"))
            );
        }
    }

    #[test]
    fn reports_are_normalized() {
        let report = WorkerHeartbeat::new(
            WorkerId::parse("w").expect("id"),
            vec![tool("b"), tool("a"), tool("b")],
            2,
            9,
        );
        assert_eq!(report.tools, [tool("a"), tool("b")]);
        assert_eq!(report.busy, 2, "busy never exceeds slots");
        assert!(WorkerId::parse("").is_err());
        assert!(WorkerId::parse("a\nb").is_err());
        assert!(WorkerId::parse(&"x".repeat(257)).is_err());
    }
}
