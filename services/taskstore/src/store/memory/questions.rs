//! Questions in memory: asking (fenced by the attempt's lease), answering
//! (scoped to the caller), under the one lock, with the decisions of
//! `domain::questions`.

use chrono::{DateTime, Utc};

use super::state::{Key, Record, State, key};
use super::{MemoryTaskStore, visible};
use crate::domain::questions::{
    self, AfterAnswers, AskStep, RESUMED_MESSAGE, after_answers, waiting_status,
};
use crate::domain::{
    Answer, Answered, Answers, FenceRefusal, InputKey, InputRequest, JsonObject, LeaseToken,
    Question, Scope, TaskId, TaskStatus, TenantId,
};
use crate::error::StoreError;

/// Moves `record` to the status its open questions call for, with the
/// message saying what is asked; `true` when that changed anything.
fn settle(record: &mut Record, now: DateTime<Utc>) -> bool {
    let (status, message) = waiting_status(&record.open_requests());
    if record.task.status == status && record.task.status_message.as_deref() == Some(&message) {
        return false;
    }
    record.transition(status, Some(message), now);
    true
}

impl MemoryTaskStore {
    pub(super) async fn ask_question(
        &self,
        tenant: &TenantId,
        task_id: &TaskId,
        lease: &LeaseToken,
        input_key: &InputKey,
        request: &InputRequest,
    ) -> Result<Option<JsonObject>, StoreError> {
        let key = key(tenant.as_str(), task_id);
        let answer = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = state
                .tasks
                .get_mut(&key)
                .filter(|r| r.is_live(now))
                .ok_or(StoreError::NotFound)?;
            let ours = record
                .dispatch
                .as_ref()
                .and_then(|d| d.lease.as_ref())
                .is_some_and(|l| &l.token == lease);
            if record.task.status.is_terminal() || !ours {
                return Err(FenceRefusal::explain(record.task.status).into());
            }
            let existing = record.questions.iter().find(|q| &q.key == input_key);
            let step = questions::ask(existing, request, record.questions.len())?;
            let changed = match step {
                AskStep::Answered(answer) => return Ok(Some(answer)),
                AskStep::Waiting => settle(record, now),
                AskStep::Ask => {
                    record.questions.push(Question {
                        key: input_key.clone(),
                        request: request.clone(),
                        asked_at: now,
                        answer: None,
                    });
                    settle(record, now);
                    true
                }
            };
            if changed {
                state.touch(&key);
                self.commit(&mut state).await?;
                self.changed(&state, &key);
            }
            None
        };
        Ok(answer)
    }

    pub(super) async fn list_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let record = visible(&mut state, scope, &key(scope.tenant.as_str(), task_id), now)?;
        Ok(record.questions.clone())
    }

    pub(super) async fn answer_questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        answers: Answers,
    ) -> Result<Answered, StoreError> {
        let key = key(scope.tenant.as_str(), task_id);
        let (answered, redispatched) = {
            let mut state = self.lock().await;
            let now = state.now();
            let record = visible(&mut state, scope, &key, now)?;
            if record.task.status.is_terminal() {
                return Err(FenceRefusal::Terminal(record.task.status).into());
            }
            let keys: Vec<InputKey> = answers.iter().map(|(k, _)| k.clone()).collect();
            let answering = questions::answering(&record.questions, &keys);
            for (given, result) in answers {
                if !answering.taken.contains(&given) {
                    continue;
                }
                if let Some(question) = record
                    .questions
                    .iter_mut()
                    .find(|q| q.key == given && q.answer.is_none())
                {
                    question.answer = Some(Answer {
                        result,
                        answered_at: now,
                    });
                }
            }
            // Nothing taken, nothing changed: no write, no news.
            let redispatched = !answering.taken.is_empty() && resume(&mut state, &key, now);
            let record = visible(&mut state, scope, &key, now)?;
            let answered = Answered {
                task: record.task.clone(),
                taken: answering.taken,
                ignored: answering.ignored,
            };
            if !answered.taken.is_empty() {
                self.commit(&mut state).await?;
                self.changed(&state, &key);
            }
            (answered, redispatched)
        };
        if redispatched {
            self.inner.outbox.notify_one();
        }
        Ok(answered)
    }
}

/// After answers were stored: the task keeps waiting, goes on, or (parked)
/// is dispatched again, as `domain::questions::after_answers` decides.
/// `true` when a job was queued.
fn resume(state: &mut State, key: &Key, now: DateTime<Utc>) -> bool {
    let Some(record) = state.tasks.get_mut(key) else {
        return false;
    };
    let parked = record.dispatch.as_ref().is_some_and(|d| d.parked);
    let step = after_answers(record.open_requests().len(), parked);
    let job = match (step, record.dispatch.as_mut()) {
        (AfterAnswers::Redispatch, Some(dispatch)) => {
            dispatch.parked = false;
            dispatch.generation += 1;
            let job = (dispatch.generation, dispatch.tool.clone());
            record.transition(TaskStatus::Working, Some(RESUMED_MESSAGE.to_owned()), now);
            Some(job)
        }
        _ => {
            // The task changes either way, so that the waiting attempt
            // hears of its answers.
            settle(record, now);
            record.task.last_updated_at = now;
            None
        }
    };
    state.touch(key);
    match job {
        Some((generation, tool)) => {
            state.enqueue(key.clone(), generation, &tool, now);
            true
        }
        None => false,
    }
}
