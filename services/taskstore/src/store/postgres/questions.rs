//! Questions on PostgreSQL (`task_input_requests`, migration 0011): asking
//! (fenced by the attempt's lease) and answering (scoped to the caller),
//! each one short transaction that locks the task's row first, so an
//! answer and a parking attempt cannot miss each other. The decisions are
//! `domain::questions`'.

use chrono::{DateTime, Utc};
use sqlx::{Postgres, Transaction};

use super::PgTaskStore;
use super::error::store_error;
use super::rows::{TaskRow, stored_json, task_columns};
use crate::domain::questions::{
    self, AfterAnswers, AskStep, RESUMED_MESSAGE, after_answers, waiting_status,
};
use crate::domain::{
    Answer, Answered, Answers, FenceRefusal, InputKey, InputRequest, JsonObject, LeaseToken,
    Question, Scope, TaskId, TaskStatus, TenantId,
};
use crate::error::StoreError;

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
struct LockedTask {
    status: String,
    status_message: Option<String>,
    parked: bool,
}

async fn questions_of(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    task_id: &str,
) -> Result<Vec<Question>, StoreError> {
    let rows = sqlx::query_as::<_, QuestionRow>(
        "SELECT request_key, request_json, asked_at, answer_json, answered_at
         FROM task_input_requests WHERE tenant_id = $1 AND task_id = $2
         ORDER BY asked_at, request_key",
    )
    .bind(tenant)
    .bind(task_id)
    .fetch_all(&mut **tx)
    .await
    .map_err(store_error)?;
    rows.into_iter().map(QuestionRow::into_question).collect()
}

/// Sets the status and message the open questions call for, when they
/// differ; whether it wrote.
async fn settle(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    task_id: &str,
    locked: &LockedTask,
    questions: &[Question],
) -> Result<bool, StoreError> {
    let open: Vec<&InputRequest> = questions
        .iter()
        .filter(|q| q.answer.is_none())
        .map(|q| &q.request)
        .collect();
    let (status, message) = waiting_status(&open);
    if locked.status == status.as_str() && locked.status_message.as_deref() == Some(&message) {
        return Ok(false);
    }
    sqlx::query(
        "UPDATE tasks SET status = $3, status_message = $4,
                last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
         WHERE tenant_id = $1 AND task_id = $2",
    )
    .bind(tenant)
    .bind(task_id)
    .bind(status.as_str())
    .bind(message)
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(true)
}

impl PgTaskStore {
    pub(super) async fn ask_question(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let locked = sqlx::query_as::<_, LockedTask>(concat!(
            "SELECT status, status_message, parked_at IS NOT NULL AS parked FROM tasks",
            " WHERE tenant_id = $1 AND task_id = $2 AND ",
            held_under!("$3"),
            " FOR UPDATE"
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .bind(lease.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?;
        let Some(locked) = locked else {
            drop(tx);
            return Err(self.fence_refusal(tenant, task_id).await);
        };
        let mut questions = questions_of(&mut tx, tenant.as_str(), task_id.as_str()).await?;
        let existing = questions.iter().find(|q| &q.key == key);
        match questions::ask(existing, request, questions.len())? {
            AskStep::Answered(answer) => return Ok(Some(answer)),
            AskStep::Waiting => {}
            AskStep::Ask => {
                let asked_at: DateTime<Utc> = sqlx::query_scalar(
                    "INSERT INTO task_input_requests
                         (tenant_id, task_id, request_key, request_json, asked_at)
                     VALUES ($1, $2, $3, $4, now()) RETURNING asked_at",
                )
                .bind(tenant.as_str())
                .bind(task_id.as_str())
                .bind(key.as_str())
                .bind(request.as_json().as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(store_error)?;
                questions.push(Question {
                    key: key.clone(),
                    request: request.clone(),
                    asked_at,
                    answer: None,
                });
            }
        }
        let (tenant, id) = (tenant.as_str(), task_id.as_str());
        settle(&mut tx, tenant, id, &locked, &questions).await?;
        tx.commit().await.map_err(store_error)?;
        Ok(None)
    }

    /// Why a fenced question was refused, from the task as it is now.
    async fn fence_refusal(&self, tenant: &TenantId, task_id: &TaskId) -> StoreError {
        let status: Result<Option<String>, StoreError> = sqlx::query_scalar(concat!(
            "SELECT status FROM tasks WHERE tenant_id = $1 AND task_id = $2 AND ",
            live!()
        ))
        .bind(tenant.as_str())
        .bind(task_id.as_str())
        .fetch_optional(self.pool())
        .await
        .map_err(store_error);
        match status {
            Ok(Some(status)) => match status.parse::<TaskStatus>() {
                Ok(status) => FenceRefusal::explain(status).into(),
                Err(_) => StoreError::Internal("corrupt task row".into()),
            },
            Ok(None) => StoreError::NotFound,
            Err(err) => err,
        }
    }

    pub(super) async fn list_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let visible: Option<String> =
            sqlx::query_scalar(concat!("SELECT task_id FROM tasks WHERE ", visible_task!()))
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

    pub(super) async fn answer_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError> {
        let (tenant, id) = (scope.tenant.as_str(), task_id.as_str());
        let mut tx = self.pool().begin().await.map_err(store_error)?;
        let locked = sqlx::query_as::<_, LockedTask>(concat!(
            "SELECT status, status_message, parked_at IS NOT NULL AS parked FROM tasks WHERE ",
            visible_task!(),
            " FOR UPDATE"
        ))
        .bind(tenant)
        .bind(id)
        .bind(scope.session.as_ref().map(|s| s.as_str()))
        .fetch_optional(&mut *tx)
        .await
        .map_err(store_error)?
        .ok_or(StoreError::NotFound)?;
        let status: TaskStatus = locked
            .status
            .parse()
            .map_err(|_| StoreError::Internal("corrupt task row".into()))?;
        if status.is_terminal() {
            return Err(FenceRefusal::Terminal(status).into());
        }
        let mut questions = questions_of(&mut tx, tenant, id).await?;
        let keys: Vec<InputKey> = answers.iter().map(|(k, _)| k.clone()).collect();
        let answering = questions::answering(&questions, &keys);
        let mut redispatched = false;
        if !answering.taken.is_empty() {
            for (key, result) in answers.iter().filter(|(k, _)| answering.taken.contains(k)) {
                let answered_at: DateTime<Utc> = sqlx::query_scalar(
                    "UPDATE task_input_requests SET answer_json = $4, answered_at = now()
                     WHERE tenant_id = $1 AND task_id = $2 AND request_key = $3
                       AND answer_json IS NULL
                     RETURNING answered_at",
                )
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
            let open = questions.iter().filter(|q| q.answer.is_none()).count();
            match after_answers(open, locked.parked) {
                AfterAnswers::Redispatch => {
                    self.redispatch_parked(&mut tx, tenant, id).await?;
                    redispatched = true;
                }
                AfterAnswers::Continue | AfterAnswers::StillWaiting => {
                    if !settle(&mut tx, tenant, id, &locked, &questions).await? {
                        // Answered, yet nothing else to say: the task still
                        // changes, so that the waiting attempt hears of it.
                        touch(&mut tx, tenant, id).await?;
                    }
                }
            }
        }
        let row = sqlx::query_as::<_, TaskRow>(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE tenant_id = $1 AND task_id = $2"
        ))
        .bind(tenant)
        .bind(id)
        .fetch_one(&mut *tx)
        .await
        .map_err(store_error)?;
        tx.commit().await.map_err(store_error)?;
        if redispatched {
            self.outbox.notify_one();
        }
        Ok(Answered {
            task: row.into_task()?,
            taken: answering.taken,
            ignored: answering.ignored,
        })
    }

    /// Dispatches a parked task again: working, a new generation and its
    /// job, the park over.
    async fn redispatch_parked(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        tenant: &str,
        task_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "WITH task AS (
                 UPDATE tasks SET status = 'working', status_message = $3, parked_at = NULL,
                        dispatch_generation = dispatch_generation + 1,
                        last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
                 WHERE tenant_id = $1 AND task_id = $2
                 RETURNING tenant_id, task_id, dispatch_generation, tool)
             INSERT INTO dispatch_outbox (tenant_id, task_id, generation, tool)
             SELECT tenant_id, task_id, dispatch_generation, tool FROM task",
        )
        .bind(tenant)
        .bind(task_id)
        .bind(RESUMED_MESSAGE)
        .execute(&mut **tx)
        .await
        .map_err(store_error)?;
        Ok(())
    }
}

/// Bumps the task's last update (and so notifies its watchers).
async fn touch(
    tx: &mut Transaction<'_, Postgres>,
    tenant: &str,
    task_id: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE tasks SET last_updated_at = GREATEST(now(), last_updated_at + interval '1 microsecond')
         WHERE tenant_id = $1 AND task_id = $2",
    )
    .bind(tenant)
    .bind(task_id)
    .execute(&mut **tx)
    .await
    .map_err(store_error)?;
    Ok(())
}
