//! A tool asks its task's caller a question ([`crate::ToolContext::ask`]):
//! the question goes to the service (AskQuestion, fenced by the lease) and
//! the tool waits for its answer, asking again whenever the task changes.
//! A key answered before is answered at once, so an attempt run again after
//! a crash finds every answer. A question that waits longer than the
//! worker's `park_after` parks the attempt: the tool is stopped, the task
//! is given back and waits without a worker, and its answer dispatches it
//! again.

use std::time::Duration;

use serde_json::Value;
use taskstore_proto::v1 as pb;
use tonic::Code;
use tonic_types::StatusExt as _;

use crate::control::{Control, Stop};
use crate::report::Reporter;

/// How often a waiting question asks again even when no change was heard
/// (a change can be missed while the attempt's watch reconnects).
const ASK_AGAIN_EVERY: Duration = Duration::from_secs(5);
/// Longest wait between tries while the service is unreachable.
const MAX_RETRY: Duration = Duration::from_secs(2);

/// Why [`crate::ToolContext::ask`] gives no answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AskError {
    /// The attempt must stop (the task was cancelled, the lease was lost,
    /// the worker is stopping): return, nothing will be stored.
    #[error("the attempt was stopped while it waited for an answer")]
    Stopped,
    /// The answer did not come within the worker's `park_after`: the task
    /// waits without a worker and runs again once answered, when the same
    /// `ask` returns the answer at once. Return now.
    #[error("the question waits for its answer without a worker")]
    Parked,
    /// The person declined or dismissed the request (an elicitation's
    /// `action` is `decline` or `cancel`); the whole answer is here.
    #[error("the question was declined ({})", action_of(.0))]
    Declined(Value),
    /// The service refused the question: a malformed key or request, or a
    /// key already used for another request.
    #[error("the question was refused: {0}")]
    Refused(String),
}

fn action_of(answer: &Value) -> &str {
    answer
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("no action")
}

/// Asks `request` under `key` and waits for the answer.
pub(crate) async fn ask(
    reporter: &Reporter,
    control: &Control,
    key: &str,
    request: &Value,
) -> Result<Value, AskError> {
    let request_json = request.to_string();
    let park_at = tokio::time::Instant::now() + control.park_after;
    let mut retry = Duration::from_millis(100);
    loop {
        if control.cancel.is_cancelled() {
            return Err(AskError::Stopped);
        }
        // Listen before asking: a change between the answer "not yet" and
        // the wait must not be missed.
        let changed = control.changed.notified();
        tokio::pin!(changed);
        changed.as_mut().enable();
        let wait = match reporter.ask(key, &request_json).await {
            Ok(Some(answer)) => return answered(request, answer),
            Ok(None) => {
                retry = Duration::from_millis(100);
                ASK_AGAIN_EVERY
            }
            Err(status) if matches!(status.code(), Code::InvalidArgument) => {
                return Err(AskError::Refused(status.message().to_owned()));
            }
            Err(status) if is_question_refusal(&status) => {
                return Err(AskError::Refused(status.message().to_owned()));
            }
            // The lease is lost or the task ended: the attempt's guards
            // stop it.
            Err(status) if matches!(status.code(), Code::FailedPrecondition | Code::NotFound) => {
                return Err(AskError::Stopped);
            }
            Err(status) => {
                tracing::warn!(error = %status.message(), "asking failed; retrying");
                retry = (retry * 2).min(MAX_RETRY);
                retry
            }
        };
        tokio::select! {
            () = control.cancel.cancelled() => return Err(AskError::Stopped),
            () = tokio::time::sleep_until(park_at) => {
                tracing::info!(key, waited_secs = control.park_after.as_secs_f64(), "no answer yet; parking the attempt");
                control.stop(Stop::Parked);
                return Err(AskError::Parked);
            }
            () = &mut changed => {}
            () = tokio::time::sleep(wait) => {}
        }
    }
}

/// Whether the service refused the question itself (a key reused for
/// another request, too many questions), as its error details say.
fn is_question_refusal(status: &tonic::Status) -> bool {
    status.code() == Code::FailedPrecondition
        && status
            .get_details_error_info()
            .is_some_and(|info| info.reason.starts_with("QUESTION_"))
}

/// The answer as the tool gets it: an elicitation that was not accepted
/// is [`AskError::Declined`].
fn answered(request: &Value, answer: String) -> Result<Value, AskError> {
    let answer: Value = serde_json::from_str(&answer)
        .map_err(|err| AskError::Refused(format!("the stored answer is not JSON: {err}")))?;
    let elicitation = request.get("method").and_then(Value::as_str) == Some("elicitation/create");
    if elicitation && action_of(&answer) != "accept" {
        return Err(AskError::Declined(answer));
    }
    Ok(answer)
}

impl Reporter {
    /// AskQuestion, fenced by this attempt's lease.
    pub(crate) async fn ask(
        &self,
        key: &str,
        request_json: &str,
    ) -> Result<Option<String>, tonic::Status> {
        let request = pb::AskQuestionRequest {
            task_id: self.task_id.clone(),
            lease_token: self.lease_token.clone(),
            tenant_id: self.tenant_id.clone(),
            key: key.to_owned(),
            request_json: request_json.to_owned(),
        };
        let response = self
            .clients()
            .execution
            .clone()
            .ask_question(request)
            .await?;
        Ok(response.into_inner().answer_json)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn elicitations_not_accepted_are_declined_and_other_answers_pass() {
        let elicit = json!({"method": "elicitation/create", "params": {"message": "ok?"}});
        let accepted = answered(
            &elicit,
            r#"{"action":"accept","content":{"ok":true}}"#.into(),
        );
        assert_eq!(
            accepted,
            Ok(json!({"action": "accept", "content": {"ok": true}}))
        );
        for action in ["decline", "cancel"] {
            let declined = answered(&elicit, format!(r#"{{"action":"{action}"}}"#));
            assert_eq!(declined, Err(AskError::Declined(json!({"action": action}))));
        }
        let roots = json!({"method": "roots/list"});
        assert_eq!(
            answered(&roots, r#"{"roots":[]}"#.into()),
            Ok(json!({"roots": []}))
        );
    }
}
