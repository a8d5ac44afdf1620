//! Whether an answer answers its question, decided once for every edge
//! (gRPC, the CLI, `/mcp`'s `tasks/update` and JSON-RPC responses, the
//! dashboard all store answers through the same store call). An
//! elicitation is answered by an MCP `ElicitResult`: `accept` with content
//! that matches the request's `requestedSchema` (MCP's restricted schema:
//! a flat object of string, number, integer, boolean and enum fields),
//! or `decline` / `cancel` with no content. Other input requests' answers
//! (a completion, the roots) are the client's to shape.

use serde_json::{Map, Value};

use super::asked::{InputMethod, InputRequest};
use super::json::JsonObject;

/// Why an answer was refused: what a person or program must fix, naming
/// the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AnswerRefused(pub String);

/// Whether `answer` answers `request`.
pub fn check_answer(request: &InputRequest, answer: &JsonObject) -> Result<(), AnswerRefused> {
    match request.method() {
        InputMethod::Elicitation => check_elicit_result(request, answer),
        InputMethod::Sampling | InputMethod::Roots => Ok(()),
    }
}

fn refused(why: impl Into<String>) -> AnswerRefused {
    AnswerRefused(why.into())
}

fn check_elicit_result(request: &InputRequest, answer: &JsonObject) -> Result<(), AnswerRefused> {
    let answer: Value = serde_json::from_str(answer.as_str())
        .map_err(|_| refused("the answer is not a JSON object"))?;
    let action = answer
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(|| refused("action must be accept, decline or cancel"))?;
    let content = answer.get("content");
    match action {
        "decline" | "cancel" if content.is_some() => Err(refused(format!(
            "a {action} carries no content: leave content out, or accept"
        ))),
        "decline" | "cancel" => Ok(()),
        "accept" => match requested_schema(request) {
            Some(schema) => check_content(schema, content),
            // A URL elicitation (2025-11-25) asks for no form.
            None => Ok(()),
        },
        other => Err(refused(format!(
            "action {other:?} is not accept, decline or cancel"
        ))),
    }
}

fn requested_schema(request: &InputRequest) -> Option<Value> {
    let text: Value = serde_json::from_str(request.as_json().as_str()).ok()?;
    text.pointer("/params/requestedSchema").cloned()
}

/// An accepted answer's content against the requested schema: only the
/// schema's own fields, each as it says (an accept without content is an
/// empty form, so a required field is missing).
fn check_content(schema: Value, content: Option<&Value>) -> Result<(), AnswerRefused> {
    let empty = Value::Object(Map::new());
    let content = content.unwrap_or(&empty);
    let Some(fields) = content.as_object() else {
        return Err(refused("content must be an object of the requested fields"));
    };
    let known = schema.get("properties").and_then(Value::as_object);
    if let Some(unknown) = fields
        .keys()
        .find(|field| !known.is_some_and(|known| known.contains_key(*field)))
    {
        return Err(refused(format!(
            "content.{unknown} is not a field of the requested schema"
        )));
    }
    let validator = match super::schema_check::compile(&schema) {
        Ok(validator) => validator,
        // The tool asked with a schema no validator reads: the answer
        // cannot be held to it, so it is taken as given.
        Err(err) => {
            tracing::warn!(error = %err, "an elicitation's requested schema does not compile; its answer is not checked");
            return Ok(());
        }
    };
    match super::schema_check::first_violation(&validator, content, "content") {
        None => Ok(()),
        Some(violation) => Err(refused(violation)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirm() -> InputRequest {
        InputRequest::parse(
            r#"{"method":"elicitation/create","params":{"message":"Format disk?",
                "requestedSchema":{"type":"object","properties":{
                    "sure":{"type":"boolean"},
                    "reason":{"type":"string","maxLength":20},
                    "when":{"type":"string","format":"date"},
                    "size":{"type":"string","enum":["small","large"]}},
                  "required":["sure"]}}}"#,
        )
        .expect("request")
    }

    fn check(answer: &str) -> Result<(), AnswerRefused> {
        check_answer(&confirm(), &JsonObject::parse(answer).expect("json"))
    }

    fn refusal(answer: &str) -> String {
        check(answer).expect_err(answer).0
    }

    #[test]
    fn accepted_content_matches_the_requested_schema() {
        assert_eq!(
            check(r#"{"action":"accept","content":{"sure":true}}"#),
            Ok(())
        );
        assert_eq!(
            check(
                r#"{"action":"accept","content":{"sure":false,"size":"small","when":"2026-11-28"}}"#
            ),
            Ok(())
        );
        for (answer, field) in [
            (
                r#"{"action":"accept","content":{"sure":"yes, and also this is not a boolean"}}"#,
                "content.sure",
            ),
            (
                r#"{"action":"accept","content":{"sure":true,"extra":[1,2,3]}}"#,
                "content.extra",
            ),
            (r#"{"action":"accept"}"#, "content"),
            (r#"{"action":"accept","content":{}}"#, "content"),
            (
                r#"{"action":"accept","content":{"sure":true,"size":"huge"}}"#,
                "content.size",
            ),
            (
                r#"{"action":"accept","content":{"sure":true,"reason":"this reason is far too long"}}"#,
                "content.reason",
            ),
            (
                r#"{"action":"accept","content":{"sure":true,"when":"not a date"}}"#,
                "content.when",
            ),
            (r#"{"action":"accept","content":[true]}"#, "content"),
        ] {
            let why = refusal(answer);
            assert!(why.starts_with(field), "{answer}: {why}");
        }
        assert!(refusal(r#"{"action":"accept"}"#).contains("sure"));
    }

    #[test]
    fn a_decline_or_cancel_carries_no_content_and_actions_are_known() {
        assert_eq!(check(r#"{"action":"decline"}"#), Ok(()));
        assert_eq!(check(r#"{"action":"cancel"}"#), Ok(()));
        assert!(refusal(r#"{"action":"decline","content":{"sure":true}}"#).contains("no content"));
        assert!(refusal(r#"{"action":"maybe"}"#).contains("accept, decline or cancel"));
        assert!(refusal(r#"{"content":{"sure":true}}"#).contains("action"));
    }

    #[test]
    fn other_requests_and_url_elicitations_are_not_held_to_a_form() {
        let roots = InputRequest::parse(r#"{"method":"roots/list"}"#).expect("request");
        let any = JsonObject::parse(r#"{"roots":[]}"#).expect("json");
        assert_eq!(check_answer(&roots, &any), Ok(()));
        let url = InputRequest::parse(
            r#"{"method":"elicitation/create","params":{"mode":"url","message":"Sign in","url":"https://example.com"}}"#,
        )
        .expect("request");
        let accepted = JsonObject::parse(r#"{"action":"accept"}"#).expect("json");
        assert_eq!(check_answer(&url, &accepted), Ok(()));
    }
}
