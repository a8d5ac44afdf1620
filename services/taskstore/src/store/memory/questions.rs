//! Questions in memory: asking (fenced by the attempt's lease), answering
//! (scoped to the caller), under the one lock, with the decisions of
//! `domain::questions`.

use async_trait::async_trait;

use super::state::key;
use super::{MemoryTaskStore, visible};
use crate::domain::questions::{self, after_answers, effects_after_answers};
use crate::domain::{
    Answer, Answered, Answers, DispatchChange, FenceRefusal, Question, Scope, TaskId,
};
use crate::error::StoreError;
use crate::store::QuestionStore;

#[async_trait]
impl QuestionStore for MemoryTaskStore {
    async fn questions(
        &self,
        scope: &Scope,
        task_id: &TaskId,
    ) -> Result<Vec<Question>, StoreError> {
        let mut state = self.lock().await;
        let now = state.now();
        let record = visible(&mut state, scope, &key(scope.tenant.as_str(), task_id), now)?;
        Ok(record.questions.clone())
    }

    async fn answer_questions(
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
            let answering = questions::answering(&record.questions, &answers)
                .map_err(|refused| StoreError::InvalidArgument(refused.to_string()))?;
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
            let redispatched = !answering.taken.is_empty() && {
                let parked = record.dispatch.as_ref().is_some_and(|d| d.parked);
                let open = record.open_requests();
                let effects = effects_after_answers(
                    after_answers(open.len(), parked),
                    &open,
                    record.task.status,
                    record.task.status_message.as_deref(),
                );
                super::apply::apply(&mut state, &key, &effects, now);
                matches!(effects.dispatch, DispatchChange::Again { .. })
            };
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
