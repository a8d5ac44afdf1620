//! Questions on PostgreSQL (`task_input_requests`, migration 0011): asking
//! (fenced by the attempt's lease) and answering (scoped to the caller),
//! each one short transaction that locks the task's row first, so an
//! answer and a parking attempt cannot miss each other. The decisions are
//! `domain::questions`'.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::PgTaskStore;
use super::error::store_error;
use super::rows::{TaskRow, stored_json, task_columns};
use crate::domain::questions::{self, after_answers, effects_after_answers, open_requests};
use crate::domain::{
    Answer, Answered, Answers, DispatchChange, FenceRefusal, InputKey, InputRequest, Question,
    Scope, TaskId, TaskStatus,
};
use crate::error::StoreError;
use crate::store::QuestionStore;
use crate::store::statements::sql;

/// The columns of a question, for every query that returns questions.
macro_rules! question_columns {
    () => {
        "request_key, request_json, asked_at, answer_json, answered_at"
    };
}
pub(super) use question_columns;

#[derive(sqlx::FromRow)]
pub(super) struct QuestionRow {
    request_key: String,
    request_json: String,
    asked_at: DateTime<Utc>,
    answer_json: Option<String>,
    answered_at: Option<DateTime<Utc>>,
}

impl QuestionRow {
    pub(super) fn into_question(self) -> Result<Question, StoreError> {
        let corrupt = || StoreError::Internal("corrupt input request row".into());
        let answer = match (self.answer_json, self.answered_at) {
            (Some(text), Some(answered_at)) => Some(Answer {
                result: stored_json(text)?,
                answered_at,
            }),
            (None, None) => None,
            _ => return Err(corrupt()),
        };
        Ok(Question {
            key: InputKey::parse(&self.request_key).map_err(|_| corrupt())?,
            request: InputRequest::parse(self.request_json).map_err(|_| corrupt())?,
            asked_at: self.asked_at,
            answer,
        })
    }
}

/// The task's row as the question statements lock it.
#[derive(sqlx::FromRow)]
pub(super) struct LockedTask {
    pub(super) status: String,
    pub(super) status_message: Option<String>,
    pub(super) parked: bool,
}

impl LockedTask {
    pub(super) fn status(&self) -> Result<TaskStatus, StoreError> {
        self.status
            .parse()
            .map_err(|_| StoreError::Internal("corrupt task row".into()))
    }
}

pub(super) async fn questions_of(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    task_id: &str,
) -> Result<Vec<Question>, StoreError> {
    let rows = sqlx::query_as::<_, QuestionRow>(sql!(
        "SELECT request_key, request_json, asked_at, answer_json, answered_at
         FROM task_input_requests WHERE tenant_id = $1 AND task_id = $2
         ORDER BY asked_at, request_key"
    ))
    .bind(tenant)
    .bind(task_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(store_error)?;
    rows.into_iter().map(QuestionRow::into_question).collect()
}

#[async_trait]
impl QuestionStore for PgTaskStore {
    async fn questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        let mut tx = self.begin().await?;
        let visible: Option<String> = sqlx::query_scalar(sql!(concat!(
            "SELECT task_id FROM tasks WHERE ",
            visible_task!()
        )))
        .bind(scope.tenant.as_str())
        .bind(task_id.as_str())
        .bind(scope.session.as_ref().map(|s| s.as_str()))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        if visible.is_none() {
            return Err(StoreError::NotFound);
        }
        let questions = questions_of(&mut tx, scope.tenant.as_str(), task_id.as_str()).await?;
        tx.rollback().await.map_err(store_error)?;
        Ok(questions)
    }

    async fn answer_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError> {
        let (tenant, id) = (scope.tenant.as_str(), task_id.as_str());
        let mut tx = self.begin().await?;
        let locked = sqlx::query_as::<_, LockedTask>(sql!(concat!(
            "SELECT status, status_message, parked_at IS NOT NULL AS parked FROM tasks WHERE ",
            visible_task!(),
            " FOR UPDATE"
        )))
        .bind(tenant)
        .bind(id)
        .bind(scope.session.as_ref().map(|s| s.as_str()))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?
        .ok_or(StoreError::NotFound)?;
        let status = locked.status()?;
        if status.is_terminal() {
            return Err(FenceRefusal::Terminal(status).into());
        }
        let mut questions = questions_of(&mut tx, tenant, id).await?;
        let answering = questions::answering(&questions, &answers)
            .map_err(|refused| StoreError::InvalidArgument(refused.to_string()))?;
        let mut redispatched = false;
        if !answering.taken.is_empty() {
            for (key, result) in answers.iter().filter(|(k, _)| answering.taken.contains(k)) {
                let answered_at: DateTime<Utc> = sqlx::query_scalar(sql!(
                    "UPDATE task_input_requests SET answer_json = $4, answered_at = now()
                     WHERE tenant_id = $1 AND task_id = $2 AND request_key = $3
                       AND answer_json IS NULL
                     RETURNING answered_at"
                ))
                .bind(tenant)
                .bind(id)
                .bind(key.as_str())
                .bind(result.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
                if let Some(question) = questions.iter_mut().find(|q| &q.key == key) {
                    question.answer = Some(Answer {
                        result: result.clone(),
                        answered_at,
                    });
                }
            }
            let open = open_requests(&questions);
            let step = after_answers(open.len(), locked.parked);
            let effects =
                effects_after_answers(step, &open, status, locked.status_message.as_deref());
            super::apply::apply(&mut tx, tenant, id, &effects).await?;
            redispatched = matches!(effects.dispatch, DispatchChange::Again { .. });
        }
        let row = sqlx::query_as::<_, TaskRow>(sql!(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = $1 AND task_id = $2"
        )))
        .bind(tenant)
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .map_err(store_error)?;
        super::commit(tx).await?;
        if redispatched {
            self.outbox.notify_one();
        }
        Ok(Answered {
            task: row.into_task()?,
            taken: answering.taken,
            ignored: answering.ignored,
        })
    }
}
