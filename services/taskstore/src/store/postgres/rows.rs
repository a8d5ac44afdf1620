//! Rows as PostgreSQL returns them, and their conversion to domain types.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::domain::{
    CursorPosition, JsonObject, SessionId, Task, TaskId, TaskStatus, ToolName, Ttl,
};
use crate::error::StoreError;

/// The columns of [`TaskRow`], for every query that returns tasks.
macro_rules! task_columns {
    () => {
        task_columns!("")
    };
    ($t:literal) => {
        concat!(
            $t,
            "task_id, ",
            $t,
            "session_id, ",
            $t,
            "status, ",
            $t,
            "status_message, ",
            $t,
            "created_at, ",
            $t,
            "last_updated_at, ",
            $t,
            "ttl_ms, ",
            $t,
            "poll_interval_ms, ",
            $t,
            "tool"
        )
    };
}
pub(super) use task_columns;

#[derive(Debug, Clone, sqlx::FromRow)]
pub(super) struct TaskRow {
    task_id: String,
    session_id: Option<String>,
    status: String,
    status_message: Option<String>,
    created_at: DateTime<Utc>,
    last_updated_at: DateTime<Utc>,
    ttl_ms: Option<i64>,
    poll_interval_ms: i64,
    tool: Option<String>,
}

#[derive(Debug, sqlx::FromRow)]
pub(super) struct TaskWithResultRow {
    #[sqlx(flatten)]
    pub(super) task: TaskRow,
    pub(super) result_json: Option<String>,
}

impl TaskRow {
    pub(super) fn task_id(&self) -> &str {
        &self.task_id
    }

    pub(super) fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    pub(super) fn created_at(&self) -> DateTime<Utc> {
        self.created_at
    }

    pub(super) fn status(&self) -> Result<TaskStatus, StoreError> {
        self.status.parse().map_err(corrupt)
    }

    /// Where a listing that ends with this task continues.
    pub(super) fn position(&self) -> Result<CursorPosition, StoreError> {
        Ok(CursorPosition {
            created_at: self.created_at,
            task_id: TaskId::parse(&self.task_id).map_err(corrupt)?,
        })
    }

    pub(super) fn into_task(self) -> Result<Task, StoreError> {
        let status = self.status()?;
        let ttl = self
            .ttl_ms
            .map(|ms| {
                u64::try_from(ms)
                    .map_err(corrupt)
                    .and_then(|ms| Ttl::from_millis(ms).map_err(corrupt))
            })
            .transpose()?;
        let poll_interval = u64::try_from(self.poll_interval_ms).map_err(corrupt)?;
        Ok(Task {
            task_id: TaskId::parse(&self.task_id).map_err(corrupt)?,
            status,
            status_message: self.status_message,
            created_at: self.created_at,
            last_updated_at: self.last_updated_at,
            ttl,
            poll_interval: Duration::from_millis(poll_interval),
            session_id: self
                .session_id
                .map(|s| SessionId::parse(&s, usize::MAX).map_err(corrupt))
                .transpose()?,
            tool: self
                .tool
                .map(|t| ToolName::parse(&t).map_err(corrupt))
                .transpose()?,
        })
    }
}

pub(super) fn stored_json(text: String) -> Result<JsonObject, StoreError> {
    JsonObject::parse(text).map_err(corrupt)
}

/// A stored value that no version of this service writes: a bug or manual
/// tampering with the table.
fn corrupt(err: impl std::fmt::Display) -> StoreError {
    tracing::error!(error = %err, "corrupt task row");
    StoreError::Internal("corrupt task row".to_owned())
}

/// A duration as the milliseconds a statement multiplies an interval by.
pub(super) fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}
