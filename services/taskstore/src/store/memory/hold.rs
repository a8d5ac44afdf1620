//! Tasks held by their caller (`domain::execution::hold`), in memory: a
//! held task carries dispatch bookkeeping of one attempt with a lease and
//! no job, so the reaper ends it like any attempt whose lease lapsed.

use super::state::{delta, key};
use super::{MemoryTaskStore, visible};
use crate::domain::{
    HoldOutcome, HoldRefusal, HoldState, HoldStep, Holder, LeaseToken, Scope, TaskId, decide_hold,
    held_by,
};
use crate::error::{Refusal, StoreError};

impl MemoryTaskStore {
    pub(super) async fn hold(
        &self,
        scope: &Scope,
        task_id: &TaskId,
        holder: &Holder,
        renewing: Option<&LeaseToken>,
    ) -> Result<HoldOutcome, StoreError> {
        let duration = self.config().execution.lease_duration;
        let key = key(scope.tenant.as_str(), task_id);
        let mut state = self.lock().await;
        let now = state.now();
        let record = visible(&mut state, scope, &key, now)?;
        let lease = record.lease().map(|l| &l.token);
        let step = decide_hold(
            &HoldState {
                status: record.task.status,
                dispatched: record.dispatch.is_some(),
                lease,
            },
            renewing,
        )
        .map_err(|refusal| StoreError::from(Refusal::Hold(refusal)))?;
        let token = match step {
            HoldStep::Stop(reason) => return Ok(HoldOutcome::Stop(reason)),
            HoldStep::Renew => {
                let lease = record
                    .dispatch
                    .as_mut()
                    .and_then(|d| d.lease.as_mut())
                    .ok_or_else(|| StoreError::Internal("a renewed hold has no lease".into()))?;
                lease.expires_at = now + delta(duration);
                lease.token.clone()
            }
            HoldStep::Grant => {
                if record.task.tool.is_none() {
                    return Err(Refusal::Hold(HoldRefusal::NotAToolCall).into());
                }
                let token = LeaseToken::generate()
                    .map_err(|_| StoreError::Internal("no randomness for a lease".into()))?;
                super::apply::apply(
                    &mut state,
                    &key,
                    &held_by(holder, token.clone(), duration),
                    now,
                );
                token
            }
        };
        state.touch(&key);
        self.commit(&mut state).await?;
        if step == HoldStep::Grant {
            self.changed(&state, &key);
        }
        Ok(HoldOutcome::Held {
            lease: token,
            duration,
        })
    }
}
