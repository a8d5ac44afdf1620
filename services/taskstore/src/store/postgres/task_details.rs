//! One task as the dashboard's task page shows it: the task with its
//! request, result, questions, attempt and lease, and its attempts'
//! history, read in one snapshot ([`PgInsights`]' bounded read).

use chrono::{DateTime, Utc};

use super::error::bounded_read_error;
use super::insights::PgInsights;
use super::questions::{QuestionRow, question_columns};
use super::rows::{TaskRow, stored_json, task_columns};
use crate::domain::{
    AttemptHistory, TaskDetails, TaskId, TaskResult, TaskStatus, TenantId, TraceContext,
};
use crate::error::StoreError;
use crate::store::statements::sql;

#[derive(sqlx::FromRow)]
struct DetailsRow {
    #[sqlx(flatten)]
    task: TaskRow,
    request_json: String,
    result_json: Option<String>,
    attempt: i32,
    max_attempts: Option<i32>,
    lease_owner: Option<String>,
    lease_expires_at: Option<DateTime<Utc>>,
    trace_context: Option<String>,
    attempt_history: Option<String>,
}

impl PgInsights {
    pub(super) async fn details(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
    ) -> Result<TaskDetails, StoreError> {
        let mut tx = self.begin().await?;
        let row: Option<DetailsRow> = sqlx::query_as(sql!(concat!(
            "SELECT ",
            task_columns!(),
            ", request_json, result_json, attempt, max_attempts, lease_owner, lease_expires_at,",
            " trace_context, attempt_history::text AS attempt_history",
            " FROM tasks WHERE ",
            live_task!()
        )))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        let row = row.ok_or(StoreError::NotFound)?;
        let questions: Vec<QuestionRow> = sqlx::query_as(sql!(concat!(
            "SELECT ",
            question_columns!(),
            " FROM task_input_requests WHERE tenant_id = $1 AND task_id = $2",
            " ORDER BY asked_at, request_key"
        )))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(bounded_read_error)?;
        PgInsights::finish(tx).await?;
        let task = row.task.into_task()?;
        let finished = matches!(task.status, TaskStatus::Completed | TaskStatus::Failed);
        let result = match row.result_json {
            Some(text) if finished => Some(TaskResult {
                task: task.clone(),
                result: stored_json(text)?,
            }),
            _ => None,
        };
        let history = attempt_history(row.attempt_history.as_deref());
        Ok(TaskDetails {
            task,
            request_json: row.request_json,
            result,
            questions: questions
                .into_iter()
                .map(QuestionRow::into_question)
                .collect::<Result<_, _>>()?,
            attempt: u32::try_from(row.attempt).unwrap_or(0),
            max_attempts: row.max_attempts.and_then(|n| u32::try_from(n).ok()),
            lease_owner: row.lease_owner,
            lease_expires_at: row.lease_expires_at,
            trace: row.trace_context.as_deref().and_then(TraceContext::parse),
            attempts: history.records,
            attempts_dropped: history.dropped,
        })
    }
}

/// The stored attempt history (NULL: none yet). One this build cannot read
/// (written by a newer one) is shown as empty rather than failing the page.
fn attempt_history(stored: Option<&str>) -> AttemptHistory {
    stored.map_or_else(AttemptHistory::default, |json| {
        serde_json::from_str(json).unwrap_or_else(|err| {
            tracing::warn!(error = %err, "an attempt history this build cannot read; shown as empty");
            AttemptHistory::default()
        })
    })
}
