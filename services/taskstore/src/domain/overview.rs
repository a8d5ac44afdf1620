//! A tenant at a glance, for the dashboard: tasks by status, open
//! questions, recent failures by tool, and tasks created and finished in
//! each of the last 60 minutes. The windows and the counting rules live
//! here, so that every backend buckets and orders alike.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};

use super::execution::ToolName;
use super::status::TaskStatus;

/// How many minutes [`Overview::per_minute`] covers.
pub const OVERVIEW_MINUTES: usize = 60;
/// How far back [`Overview::failures_by_tool`] looks, in minutes.
pub const FAILURE_WINDOW_MINUTES: i64 = 60;

/// Tasks created and finished in one minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinuteCounts {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    pub created: u64,
    /// Tasks that reached completed, failed or cancelled in the minute.
    /// Approximated by the last update of the tasks that are terminal now:
    /// a terminal task changes no more, so its last update is when it
    /// finished.
    pub finished: u64,
}

/// A tenant at a glance.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Overview {
    /// Unexpired tasks in each status (every status listed, zeros too).
    pub by_status: Vec<(TaskStatus, u64)>,
    /// Open questions (tasks waiting for input may ask several): the
    /// unanswered questions of unexpired tasks that are not terminal (a
    /// terminal task's questions can no longer be answered).
    pub open_questions: u64,
    /// Tasks that failed in the last hour, by tool (none: `None`), most first.
    pub failures_by_tool: Vec<(Option<ToolName>, u64)>,
    /// The last 60 minutes, oldest first, the current minute last.
    pub per_minute: Vec<MinuteCounts>,
}

/// The minutes since the Unix epoch, rounded down: the bucket of an
/// instant, whatever the time zone (PostgreSQL computes the same as
/// `floor(extract(epoch FROM at) / 60)`).
pub fn epoch_minute(at: DateTime<Utc>) -> i64 {
    at.timestamp().div_euclid(60)
}

/// The times an overview as of `now` looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverviewWindow {
    /// The start of the oldest minute of [`Overview::per_minute`].
    pub minutes_from: DateTime<Utc>,
    /// The end of the current minute (exclusive).
    pub minutes_until: DateTime<Utc>,
    /// Failures at or after this count ([`Overview::failures_by_tool`]).
    pub failures_from: DateTime<Utc>,
}

impl OverviewWindow {
    pub fn at(now: DateTime<Utc>) -> Self {
        let current = minute_start(epoch_minute(now));
        Self {
            minutes_from: current - TimeDelta::minutes(OVERVIEW_MINUTES as i64 - 1),
            minutes_until: current + TimeDelta::minutes(1),
            failures_from: now - TimeDelta::minutes(FAILURE_WINDOW_MINUTES),
        }
    }
}

fn minute_start(epoch_minute: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(epoch_minute.saturating_mul(60), 0).unwrap_or_default()
}

/// An [`Overview`] being counted: backends add what they find, then
/// [`OverviewCounts::finish`] orders it.
#[derive(Debug, Clone)]
pub struct OverviewCounts {
    window: OverviewWindow,
    /// By the status's place in [`TaskStatus::ALL`].
    by_status: [u64; TaskStatus::ALL.len()],
    open_questions: u64,
    failures: BTreeMap<Option<ToolName>, u64>,
    per_minute: Vec<MinuteCounts>,
}

impl OverviewCounts {
    /// Nothing counted yet, as of `now`.
    pub fn new(now: DateTime<Utc>) -> Self {
        let window = OverviewWindow::at(now);
        let first = epoch_minute(window.minutes_from);
        let per_minute = (0..OVERVIEW_MINUTES as i64)
            .map(|i| MinuteCounts {
                minute: minute_start(first + i),
                created: 0,
                finished: 0,
            })
            .collect();
        Self {
            window,
            by_status: [0; TaskStatus::ALL.len()],
            open_questions: 0,
            failures: BTreeMap::new(),
            per_minute,
        }
    }

    pub fn window(&self) -> OverviewWindow {
        self.window
    }

    pub fn add_status(&mut self, status: TaskStatus, count: u64) {
        if let Some(index) = TaskStatus::ALL.iter().position(|s| *s == status) {
            self.by_status[index] += count;
        }
    }

    pub fn add_open_questions(&mut self, count: u64) {
        self.open_questions += count;
    }

    pub fn add_failures(&mut self, tool: Option<ToolName>, count: u64) {
        *self.failures.entry(tool).or_default() += count;
    }

    fn minute(&mut self, epoch_minute: i64) -> Option<&mut MinuteCounts> {
        let first = self.per_minute.first()?.minute;
        let index = usize::try_from(epoch_minute - self::epoch_minute(first)).ok()?;
        self.per_minute.get_mut(index)
    }

    /// Tasks created in the minute `epoch_minute` (outside the window:
    /// ignored).
    pub fn add_created(&mut self, epoch_minute: i64, count: u64) {
        if let Some(minute) = self.minute(epoch_minute) {
            minute.created += count;
        }
    }

    /// Tasks finished in the minute `epoch_minute` (outside the window:
    /// ignored).
    pub fn add_finished(&mut self, epoch_minute: i64, count: u64) {
        if let Some(minute) = self.minute(epoch_minute) {
            minute.finished += count;
        }
    }

    /// The overview: statuses in lifecycle order, failures most first (ties
    /// by tool name, tasks without a tool last).
    pub fn finish(self) -> Overview {
        let by_status = TaskStatus::ALL.into_iter().zip(self.by_status).collect();
        let mut failures_by_tool: Vec<(Option<ToolName>, u64)> =
            self.failures.into_iter().filter(|(_, n)| *n > 0).collect();
        failures_by_tool.sort_by(|(tool_a, a), (tool_b, b)| {
            b.cmp(a)
                .then_with(|| tool_a.is_none().cmp(&tool_b.is_none()))
                .then_with(|| tool_a.cmp(tool_b))
        });
        Overview {
            by_status,
            open_questions: self.open_questions,
            failures_by_tool,
            per_minute: self.per_minute,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(rfc3339)
            .expect("a valid instant")
            .with_timezone(&Utc)
    }

    #[test]
    fn sixty_minutes_oldest_first_ending_with_the_current_one() {
        let now = at("2026-03-01T12:30:45.5Z");
        let mut counts = OverviewCounts::new(now);
        counts.add_created(epoch_minute(now), 2);
        counts.add_created(epoch_minute(at("2026-03-01T11:31:00Z")), 1);
        counts.add_created(epoch_minute(at("2026-03-01T11:30:59Z")), 7);
        counts.add_finished(epoch_minute(at("2026-03-01T12:31:00Z")), 9);
        let overview = counts.finish();
        assert_eq!(overview.per_minute.len(), OVERVIEW_MINUTES);
        let first = overview.per_minute[0];
        assert_eq!(first.minute, at("2026-03-01T11:31:00Z"));
        assert_eq!((first.created, first.finished), (1, 0));
        let last = overview.per_minute[OVERVIEW_MINUTES - 1];
        assert_eq!(last.minute, at("2026-03-01T12:30:00Z"));
        assert_eq!((last.created, last.finished), (2, 0));
        let total: u64 = overview.per_minute.iter().map(|m| m.created).sum();
        assert_eq!(total, 3, "outside the window: not counted");
        let window = OverviewWindow::at(now);
        assert_eq!(window.minutes_until, at("2026-03-01T12:31:00Z"));
        assert_eq!(window.failures_from, at("2026-03-01T11:30:45.5Z"));
    }

    #[test]
    fn every_status_and_failures_most_first() {
        let mut counts = OverviewCounts::new(at("2026-03-01T12:00:00Z"));
        counts.add_status(TaskStatus::Failed, 3);
        let tool = |t: &str| Some(ToolName::parse(t).expect("tool"));
        counts.add_failures(None, 2);
        counts.add_failures(tool("b"), 2);
        counts.add_failures(tool("a"), 2);
        counts.add_failures(tool("c"), 5);
        let overview = counts.finish();
        assert_eq!(
            overview.by_status,
            vec![
                (TaskStatus::Working, 0),
                (TaskStatus::InputRequired, 0),
                (TaskStatus::Completed, 0),
                (TaskStatus::Failed, 3),
                (TaskStatus::Cancelled, 0),
            ]
        );
        assert_eq!(
            overview.failures_by_tool,
            vec![(tool("c"), 5), (tool("a"), 2), (tool("b"), 2), (None, 2)]
        );
    }
}
