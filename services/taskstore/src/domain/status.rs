//! The task lifecycle.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// The status of a task. `Completed`, `Failed` and `Cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl TaskStatus {
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::Working,
        TaskStatus::InputRequired,
        TaskStatus::Completed,
        TaskStatus::Failed,
        TaskStatus::Cancelled,
    ];

    pub fn is_terminal(self) -> bool {
        match self {
            TaskStatus::Working | TaskStatus::InputRequired => false,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled => true,
        }
    }

    /// The MCP wire name, also the stored form.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` honours width and alignment, so status columns line up.
        f.pad(self.as_str())
    }
}

/// An unknown status name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task status {0:?} (one of {known})", known = known_statuses())]
pub struct UnknownStatus(pub String);

fn known_statuses() -> String {
    TaskStatus::ALL.map(TaskStatus::as_str).join(", ")
}

impl FromStr for TaskStatus {
    type Err = UnknownStatus;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        TaskStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == raw)
            .ok_or_else(|| UnknownStatus(raw.to_owned()))
    }
}

/// The two statuses a stored result can carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultStatus {
    Completed,
    Failed,
}

impl From<ResultStatus> for TaskStatus {
    fn from(status: ResultStatus) -> Self {
        match status {
            ResultStatus::Completed => TaskStatus::Completed,
            ResultStatus::Failed => TaskStatus::Failed,
        }
    }
}

impl TryFrom<TaskStatus> for ResultStatus {
    type Error = TaskStatus;

    fn try_from(status: TaskStatus) -> Result<Self, Self::Error> {
        match status {
            TaskStatus::Completed => Ok(ResultStatus::Completed),
            TaskStatus::Failed => Ok(ResultStatus::Failed),
            other @ (TaskStatus::Working | TaskStatus::InputRequired | TaskStatus::Cancelled) => {
                Err(other)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for status in TaskStatus::ALL {
            assert_eq!(status.as_str().parse::<TaskStatus>(), Ok(status));
        }
        assert!("done".parse::<TaskStatus>().is_err());
    }

    #[test]
    fn exactly_the_three_final_statuses_are_terminal() {
        let terminal: Vec<_> = TaskStatus::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(
            terminal,
            [
                TaskStatus::Completed,
                TaskStatus::Failed,
                TaskStatus::Cancelled
            ]
        );
    }
}
