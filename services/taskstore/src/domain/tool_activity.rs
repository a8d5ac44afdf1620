//! How each tool fared in the last hour, for the dashboard's tools page:
//! tasks completed, failed and cancelled, the failure rate, and how long
//! tasks took from creation to their end (median and 95th percentile).
//!
//! Counted over a bounded sample, the most recently finished tasks of the
//! hour ([`ACTIVITY_SAMPLE`] at most), so that a busy tenant's page costs
//! the same as a quiet one's; every backend feeds [`ActivitySample`] the
//! finished tasks it finds and this module picks, counts and ranks.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::execution::ToolName;
use super::status::TaskStatus;

/// At most this many finished tasks are counted (the most recent).
pub const ACTIVITY_SAMPLE: u32 = 5_000;

/// One tool's last hour (in the sample).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolActivity {
    /// `None`: tasks created without naming a tool.
    pub tool: Option<ToolName>,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    /// Creation to end, in milliseconds, by nearest rank.
    pub p50_ms: u64,
    pub p95_ms: u64,
}

impl ToolActivity {
    /// Failed among the tasks that ran to an end of their own (cancelled
    /// ones are left out: a caller stopped them); `None` without any.
    pub fn failure_rate(&self) -> Option<f64> {
        let ran = self.completed + self.failed;
        (ran > 0).then(|| self.failed as f64 / ran as f64)
    }
}

/// The tools' last hour.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Activity {
    /// Most finished tasks first (ties by tool name, no tool last).
    pub tools: Vec<ToolActivity>,
    /// Whether more tasks finished in the hour than were counted.
    pub sampled: bool,
}

impl Activity {
    pub fn of(&self, tool: &ToolName) -> Option<&ToolActivity> {
        self.tools
            .iter()
            .find(|activity| activity.tool.as_ref() == Some(tool))
    }
}

/// Finished tasks gathered by a backend, then counted by [`finish`].
///
/// [`finish`]: ActivitySample::finish
#[derive(Debug, Clone, Default)]
pub struct ActivitySample {
    finished: Vec<(DateTime<Utc>, Option<ToolName>, TaskStatus, u64)>,
}

impl ActivitySample {
    /// A task that ended with `status` at `ended_at`, `duration_ms` after
    /// it was created. Tasks that have not ended are ignored.
    pub fn add(
        &mut self,
        ended_at: DateTime<Utc>,
        tool: Option<ToolName>,
        status: TaskStatus,
        duration_ms: u64,
    ) {
        if status.is_terminal() {
            self.finished.push((ended_at, tool, status, duration_ms));
        }
    }

    /// The activity of the [`ACTIVITY_SAMPLE`] most recently finished
    /// tasks; `more` when the backend knows of others beyond them.
    pub fn finish(mut self, more: bool) -> Activity {
        self.finished
            .sort_by_key(|finished| std::cmp::Reverse(finished.0));
        let sampled = more || self.finished.len() > ACTIVITY_SAMPLE as usize;
        self.finished.truncate(ACTIVITY_SAMPLE as usize);
        let mut by_tool: BTreeMap<Option<ToolName>, ([u64; 3], Vec<u64>)> = BTreeMap::new();
        for (_, tool, status, duration) in self.finished {
            let (ends, durations) = by_tool.entry(tool).or_default();
            match status {
                TaskStatus::Completed => ends[0] += 1,
                TaskStatus::Failed => ends[1] += 1,
                _ => ends[2] += 1,
            }
            durations.push(duration);
        }
        let mut tools: Vec<ToolActivity> = by_tool
            .into_iter()
            .map(|(tool, ([completed, failed, cancelled], mut durations))| {
                durations.sort_unstable();
                ToolActivity {
                    tool,
                    completed,
                    failed,
                    cancelled,
                    p50_ms: nearest_rank(&durations, 50),
                    p95_ms: nearest_rank(&durations, 95),
                }
            })
            .collect();
        tools.sort_by(|a, b| {
            let total = |t: &ToolActivity| t.completed + t.failed + t.cancelled;
            total(b)
                .cmp(&total(a))
                .then_with(|| a.tool.is_none().cmp(&b.tool.is_none()))
                .then_with(|| a.tool.cmp(&b.tool))
        });
        Activity { tools, sampled }
    }
}

/// The `percent`th percentile of sorted `values` by nearest rank (0 when
/// empty).
fn nearest_rank(sorted: &[u64], percent: usize) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (percent * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn tool(name: &str) -> Option<ToolName> {
        Some(ToolName::parse(name).expect("a tool name"))
    }

    #[test]
    fn ends_are_counted_by_tool_with_their_durations_ranked() {
        let now = Utc::now();
        let mut sample = ActivitySample::default();
        for ms in 1..=100 {
            sample.add(now, tool("echo"), TaskStatus::Completed, ms);
        }
        sample.add(now, tool("echo"), TaskStatus::Failed, 1_000);
        sample.add(now, tool("echo"), TaskStatus::Cancelled, 5);
        sample.add(now, tool("hash"), TaskStatus::Failed, 7);
        sample.add(now, None, TaskStatus::Completed, 3);
        sample.add(now, tool("hash"), TaskStatus::Working, 9);
        let activity = sample.finish(false);
        assert!(!activity.sampled);
        let echo = activity
            .of(&ToolName::parse("echo").expect("name"))
            .expect("echo");
        assert_eq!((echo.completed, echo.failed, echo.cancelled), (100, 1, 1));
        assert_eq!((echo.p50_ms, echo.p95_ms), (50, 96));
        assert_eq!(echo.failure_rate(), Some(1.0 / 101.0));
        let hash = activity
            .of(&ToolName::parse("hash").expect("name"))
            .expect("hash");
        assert_eq!(
            (hash.completed, hash.failed, hash.p50_ms),
            (0, 1, 7),
            "working: ignored"
        );
        assert_eq!(activity.tools[0].tool, tool("echo"), "most first");
        assert_eq!(activity.tools[2].tool, None, "no tool last");
        assert_eq!(ActivitySample::default().finish(false), Activity::default());
    }

    #[test]
    fn only_the_most_recent_tasks_are_counted() {
        let now = Utc::now();
        let mut sample = ActivitySample::default();
        sample.add(
            now - TimeDelta::minutes(30),
            tool("old"),
            TaskStatus::Failed,
            1,
        );
        for _ in 0..ACTIVITY_SAMPLE {
            sample.add(now, tool("new"), TaskStatus::Completed, 1);
        }
        let activity = sample.finish(false);
        assert!(activity.sampled);
        assert_eq!(activity.tools.len(), 1, "the oldest fell out of the sample");
        assert!(ActivitySample::default().finish(true).sampled);
    }
}
