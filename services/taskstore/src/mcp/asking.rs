//! A task's questions over MCP, both revisions, kept in the store only:
//!
//! - 2025-11-25: each open question goes to the client as a JSON-RPC
//!   request (`elicitation/create`, …) on a response stream of its
//!   (`waiting.rs`). Its id is sealed (`domain::Sealer`) over the task, the
//!   key, and the caller's tenant and session, so that the client's
//!   response, POSTed to any replica (restarted or not), finds its question
//!   without state in a replica, and no other caller can answer it.
//! - 2026-07-28: open questions are inlined in `tasks/get` as
//!   `inputRequests`; `tasks/update` answers them; a synchronous call that
//!   needs input answers `input_required` with a sealed `requestState`.

use serde_json::{Map, Value, json};

use super::call::Call;
use super::gateway::Gateway;
use super::jsonrpc::{Id, RpcError};
use super::shapes::RELATED_TASK;
use crate::domain::{
    Answers, InputKey, JsonObject, Operation, Purpose, Question, Scope, TaskId, may,
};
use crate::error::StoreError;

/// Sealed input request ids start so (our requests' ids, not a client's).
const ID_PREFIX: &str = "tsq.";

/// The request asking `question` of task `task_id`: a JSON-RPC request
/// with a sealed id, tied to its task (`related-task` meta) when the client
/// knows the task.
pub(super) fn input_request(
    gateway: &Gateway,
    scope: &Scope,
    task_id: &TaskId,
    question: &Question,
    related: bool,
) -> Value {
    let id = format!(
        "{ID_PREFIX}{}",
        gateway.sealer.seal(
            Purpose::InputRequestId,
            scope,
            &[task_id.as_str(), question.key.as_str()]
        )
    );
    let request: Value =
        serde_json::from_str(question.request.as_json().as_str()).unwrap_or(Value::Null);
    let mut params = request
        .get("params")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    if related {
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(RELATED_TASK.into(), json!({ "taskId": task_id.as_str() }));
        }
    }
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": question.request.method().as_str(),
        "params": params,
    })
}

/// A client's response to a request we sent: its result is the answer to
/// the question the id names. Ids we did not seal for this caller (forged,
/// replayed by another tenant or session, or a client's confusion) name
/// nothing and change nothing.
pub(super) async fn take_response(
    gateway: &Gateway,
    call: &Call,
    id: &Id,
    outcome: Result<Map<String, Value>, Value>,
) -> Result<(), RpcError> {
    if !may(&call.caller, Operation::AnswerQuestions) {
        return Ok(());
    }
    let Some(token) = id
        .as_json()
        .as_str()
        .and_then(|s| s.strip_prefix(ID_PREFIX))
    else {
        tracing::debug!("mcp response to no request of ours; dropped");
        return Ok(());
    };
    let Some((task_id, key)) = gateway
        .sealer
        .open(Purpose::InputRequestId, &call.scope, token)
        .ok()
        .and_then(|parts| match parts.as_slice() {
            [task, key] => Some((TaskId::parse(task).ok()?, InputKey::parse(key).ok()?)),
            _ => None,
        })
    else {
        tracing::info!("mcp response with an id not sealed for this caller; dropped");
        return Ok(());
    };
    let result = match outcome {
        Ok(result) => result,
        Err(error) => {
            // The client could not ask (no elicitation support, say): the
            // question stays open for another way to answer it.
            tracing::info!(task_id = %task_id, key = %key, error = %error, "mcp client answered an input request with an error; the question stays open");
            return Ok(());
        }
    };
    let answer = match JsonObject::parse(Value::Object(result).to_string()) {
        Ok(answer) if answer.as_str().len() <= gateway.limits.max_json_bytes => answer,
        _ => {
            tracing::info!(task_id = %task_id, "mcp answer too large or malformed; dropped");
            return Ok(());
        }
    };
    match gateway
        .store
        .answer_questions(&call.scope, &task_id, vec![(key.clone(), answer)])
        .await
    {
        Ok(answered) => {
            tracing::info!(task_id = %task_id, key = %key, taken = !answered.taken.is_empty(), "input request answered over mcp");
        }
        // An answer that does not answer its question (content against
        // the requested schema): the client is told, the question stays
        // open.
        Err(err @ StoreError::InvalidArgument(_)) => return Err(RpcError::from(err)),
        Err(err) => {
            tracing::info!(task_id = %task_id, key = %key, error = %err, "mcp answer not stored");
        }
    }
    Ok(())
}

/// 2026-07-28: the open questions as `inputRequests` (key → request).
pub(super) fn input_requests(questions: &[Question]) -> Value {
    let requests: Map<String, Value> = questions
        .iter()
        .filter(|q| q.answer.is_none())
        .map(|q| {
            let request = serde_json::from_str(q.request.as_json().as_str()).unwrap_or(Value::Null);
            (q.key.to_string(), request)
        })
        .collect();
    Value::Object(requests)
}

/// `inputResponses` as answers: key → an object each (a client's result).
pub(super) fn answers_of(gateway: &Gateway, raw: Option<&Value>) -> Result<Answers, RpcError> {
    let responses = match raw {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(responses)) => responses,
        Some(_) => {
            return Err(RpcError::invalid_params(
                "params.inputResponses must be an object",
            ));
        }
    };
    if responses.len() > crate::domain::questions::MAX_QUESTIONS {
        return Err(RpcError::invalid_params(
            "params.inputResponses has too many entries",
        ));
    }
    responses
        .iter()
        .map(|(key, response)| {
            let key = InputKey::parse(key)
                .map_err(|err| RpcError::invalid_params(format!("inputResponses key {err}")))?;
            let text = response.to_string();
            if !response.is_object() || text.len() > gateway.limits.max_json_bytes {
                return Err(RpcError::invalid_params(format!(
                    "inputResponses.{key} must be an object of at most {} bytes",
                    gateway.limits.max_json_bytes
                )));
            }
            let answer = JsonObject::parse(text).map_err(|err| RpcError::invalid_params(err.0))?;
            Ok((key, answer))
        })
        .collect()
}

/// Stores `answers` for the task (MCP: eventually consistent; answers to
/// unknown or answered keys, or to a task that ended, are ignored).
pub(super) async fn answer(
    gateway: &Gateway,
    scope: &Scope,
    task_id: &TaskId,
    answers: Answers,
) -> Result<(), RpcError> {
    if answers.is_empty() {
        gateway.store.get_task(scope, task_id).await?;
        return Ok(());
    }
    match gateway
        .store
        .answer_questions(scope, task_id, answers)
        .await
    {
        Ok(_) | Err(StoreError::FailedPrecondition(_)) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// The task a 2026-07-28 `requestState` names, if this service sealed it
/// for this caller.
pub(super) fn task_of_request_state(
    gateway: &Gateway,
    call: &Call,
    state: &str,
) -> Result<TaskId, RpcError> {
    gateway
        .sealer
        .open(Purpose::RequestState, &call.scope, state)
        .ok()
        .and_then(|parts| match parts.as_slice() {
            [task] => TaskId::parse(task).ok(),
            _ => None,
        })
        .ok_or_else(|| {
            RpcError::invalid_params("params.requestState is not one this server gave this caller")
        })
}

/// The `requestState` of a synchronous call waiting for input on
/// `task_id`.
pub(super) fn request_state(gateway: &Gateway, call: &Call, task_id: &TaskId) -> String {
    gateway
        .sealer
        .seal(Purpose::RequestState, &call.scope, &[task_id.as_str()])
}
