//! Questions a task asks its caller (MCP input requests) and their
//! answers: what a question is, and the decisions every backend takes the
//! same way: what asking a key does, which answers are taken, the task's
//! status and message while it waits, and what a parked task holds.
//! `docs/execution.md` explains the protocol around them.

use std::fmt;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::json::{InvalidJson, JsonObject};
use super::status::TaskStatus;
use super::task::Task;

/// A question's key, chosen by the tool; unique over the task's whole life
/// (never reused for another request, never asked again once answered).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct InputKey(String);

impl InputKey {
    /// Longest key, in bytes.
    pub const MAX_BYTES: usize = 256;

    pub fn parse(raw: &str) -> Result<Self, InvalidJson> {
        if raw.is_empty() || raw.len() > Self::MAX_BYTES {
            return Err(InvalidJson(format!(
                "must be 1 to {} bytes",
                Self::MAX_BYTES
            )));
        }
        if raw.chars().any(char::is_control) {
            return Err(InvalidJson("must not hold control characters".into()));
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InputKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

/// What an MCP input request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputMethod {
    /// `elicitation/create`: a form or a URL for a person.
    Elicitation,
    /// `sampling/createMessage`: a completion from the client's model.
    Sampling,
    /// `roots/list`: the client's roots.
    Roots,
}

impl InputMethod {
    pub const ALL: [InputMethod; 3] = [
        InputMethod::Elicitation,
        InputMethod::Sampling,
        InputMethod::Roots,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            InputMethod::Elicitation => "elicitation/create",
            InputMethod::Sampling => "sampling/createMessage",
            InputMethod::Roots => "roots/list",
        }
    }
}

/// An input request as MCP writes it, `{"method": …, "params": {…}}`, kept
/// as the text the tool sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRequest {
    method: InputMethod,
    /// What a person reads in the task's status message.
    summary: String,
    text: JsonObject,
}

impl InputRequest {
    /// Longest summary kept in a status message, in characters.
    const SUMMARY_CHARS: usize = 200;
    /// Largest request, in bytes: a form's schema fits many times over.
    pub const MAX_BYTES: usize = 64 * 1024;

    /// Parses `{"method", "params"}`: a method of [`InputMethod`], params an
    /// object (absent for `roots/list`); an elicitation needs a `message`.
    pub fn parse(text: impl Into<String>) -> Result<Self, InvalidJson> {
        let text = text.into();
        if text.len() > Self::MAX_BYTES {
            return Err(InvalidJson(format!(
                "is larger than {} bytes",
                Self::MAX_BYTES
            )));
        }
        let text = JsonObject::parse(text)?;
        let value: Value = serde_json::from_str(text.as_str())
            .map_err(|err| InvalidJson(format!("is not valid JSON: {err}")))?;
        let method_name = value.get("method").and_then(Value::as_str).ok_or_else(|| {
            InvalidJson(
                "needs a method: elicitation/create, sampling/createMessage or roots/list".into(),
            )
        })?;
        let method = InputMethod::ALL
            .into_iter()
            .find(|m| m.as_str() == method_name)
            .ok_or_else(|| {
                InvalidJson(format!(
                    "method {method_name:?} is not an input request (elicitation/create, sampling/createMessage or roots/list)"
                ))
            })?;
        if let Some(extra) = value.as_object().and_then(|o| {
            o.keys()
                .find(|k| !matches!(k.as_str(), "method" | "params"))
        }) {
            return Err(InvalidJson(format!(
                "has {extra:?}: an input request holds only method and params"
            )));
        }
        let params = value.get("params");
        if params.is_some_and(|p| !p.is_object()) {
            return Err(InvalidJson("params must be an object".into()));
        }
        let summary = match method {
            InputMethod::Elicitation => params
                .and_then(|p| p.get("message"))
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| InvalidJson("elicitation/create needs params.message".into()))?,
            InputMethod::Sampling => "asks for a completion from the client's model".to_owned(),
            InputMethod::Roots => "asks for the client's roots".to_owned(),
        };
        let summary = summary.chars().take(Self::SUMMARY_CHARS).collect();
        Ok(Self {
            method,
            summary,
            text,
        })
    }

    pub fn method(&self) -> InputMethod {
        self.method
    }

    /// What is asked, in a few words (an elicitation's message).
    pub fn summary(&self) -> &str {
        &self.summary
    }

    pub fn as_json(&self) -> &JsonObject {
        &self.text
    }

    /// Whether `other` asks the same: the same method and params, however
    /// the JSON was spaced or ordered.
    pub fn same_as(&self, other: &InputRequest) -> bool {
        let parse = |r: &InputRequest| serde_json::from_str::<Value>(r.text.as_str()).ok();
        self.method == other.method && parse(self) == parse(other)
    }
}

/// A question as stored: what was asked, and its answer once given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub key: InputKey,
    pub request: InputRequest,
    pub asked_at: DateTime<Utc>,
    pub answer: Option<Answer>,
}

/// An answer: the client's result for the request (an `ElicitResult`, a
/// `CreateMessageResult`, a `ListRootsResult`), as it sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub result: JsonObject,
    pub answered_at: DateTime<Utc>,
}

/// A refused question.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuestionRefusal {
    /// The key was asked before with another request: keys are unique over
    /// the task's life.
    #[error("input request key {0} was already used for another request")]
    KeyReused(String),
    /// The task asks too many questions.
    #[error("the task already has {0} input requests, the most it may ask")]
    TooMany(usize),
}

/// What asking a key does, given the question under that key, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskStep {
    /// Answered before (by the person, for an earlier attempt): here it is.
    Answered(JsonObject),
    /// Asked before, not answered yet: keep waiting.
    Waiting,
    /// New: store it; the task waits for its answer.
    Ask,
}

/// Most questions a task may ask over its life.
pub const MAX_QUESTIONS: usize = 100;

/// The decision for asking `request` under a key whose question is
/// `existing`, on a task that has asked `asked` questions so far.
pub fn ask(
    existing: Option<&Question>,
    request: &InputRequest,
    asked: usize,
) -> Result<AskStep, QuestionRefusal> {
    match existing {
        Some(question) if !question.request.same_as(request) => {
            Err(QuestionRefusal::KeyReused(question.key.to_string()))
        }
        Some(Question {
            answer: Some(answer),
            ..
        }) => Ok(AskStep::Answered(answer.result.clone())),
        Some(_) => Ok(AskStep::Waiting),
        None if asked >= MAX_QUESTIONS => Err(QuestionRefusal::TooMany(asked)),
        None => Ok(AskStep::Ask),
    }
}

/// Which of the given answers are taken: those for open questions, once
/// each. Answers to unknown or answered keys are ignored (MCP: the client
/// may repeat itself, or answer a request superseded since).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answering {
    pub taken: Vec<InputKey>,
    pub ignored: Vec<InputKey>,
}

pub fn answering<'a>(
    questions: impl IntoIterator<Item = &'a Question>,
    given: impl IntoIterator<Item = &'a InputKey>,
) -> Answering {
    let open: Vec<&InputKey> = questions
        .into_iter()
        .filter(|q| q.answer.is_none())
        .map(|q| &q.key)
        .collect();
    let mut answering = Answering::default();
    for key in given {
        if open.contains(&key) && !answering.taken.contains(key) {
            answering.taken.push(key.clone());
        } else {
            answering.ignored.push(key.clone());
        }
    }
    answering
}

/// The task's status and status message given the requests still open:
/// `input_required` saying what is asked while any is, `working` once all
/// are answered.
pub fn waiting_status(open: &[&InputRequest]) -> (TaskStatus, String) {
    match open {
        [] => (TaskStatus::Working, "answered; continuing".to_owned()),
        [only] => (TaskStatus::InputRequired, only.summary().to_owned()),
        [first, rest @ ..] => (
            TaskStatus::InputRequired,
            format!(
                "{} (and {} more input request{})",
                first.summary(),
                rest.len(),
                if rest.len() == 1 { "" } else { "s" }
            ),
        ),
    }
}

/// Answers by key, as AnswerInputRequests (and MCP `tasks/update`) give
/// them.
pub type Answers = Vec<(InputKey, JsonObject)>;

/// What AnswerInputRequests did: the task after it, and which answers
/// were taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub task: Task,
    pub taken: Vec<InputKey>,
    pub ignored: Vec<InputKey>,
}

/// What answering does to a task whose questions are now all answered,
/// or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterAnswers {
    /// Some are still open: the task keeps waiting.
    StillWaiting,
    /// All answered and an attempt waits for them: it goes on.
    Continue,
    /// All answered and the task was parked (no attempt holds it): it is
    /// dispatched again, and the new attempt finds the answers.
    Redispatch,
}

/// The decision once answers were stored.
pub fn after_answers(still_open: usize, parked: bool) -> AfterAnswers {
    match (still_open, parked) {
        (0, true) => AfterAnswers::Redispatch,
        (0, false) => AfterAnswers::Continue,
        _ => AfterAnswers::StillWaiting,
    }
}

/// The status message of a task dispatched again after its answers came.
pub const RESUMED_MESSAGE: &str = "answered; dispatched again to continue";

#[cfg(test)]
mod tests {
    use super::*;

    fn request(text: &str) -> InputRequest {
        InputRequest::parse(text).expect("a valid request")
    }

    fn confirm() -> InputRequest {
        request(
            r#"{"method":"elicitation/create","params":{"message":"Delete 3 files?","requestedSchema":{"type":"object","properties":{}}}}"#,
        )
    }

    fn question(key: &str, request: InputRequest, answer: Option<&str>) -> Question {
        Question {
            key: InputKey::parse(key).expect("key"),
            request,
            asked_at: Utc::now(),
            answer: answer.map(|text| Answer {
                result: JsonObject::parse(text).expect("json"),
                answered_at: Utc::now(),
            }),
        }
    }

    #[test]
    fn input_requests_are_parsed_and_summarized() {
        let confirm = confirm();
        assert_eq!(confirm.method(), InputMethod::Elicitation);
        assert_eq!(confirm.summary(), "Delete 3 files?");
        let url = request(
            r#"{"method":"elicitation/create","params":{"mode":"url","message":"Sign in","url":"https://example.com","elicitationId":"e1"}}"#,
        );
        assert_eq!(url.summary(), "Sign in");
        assert_eq!(
            request(
                r#"{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}"#
            )
            .method(),
            InputMethod::Sampling
        );
        assert_eq!(
            request(r#"{"method":"roots/list"}"#).method(),
            InputMethod::Roots
        );
        for bad in [
            "[]",
            "{}",
            r#"{"method":"tools/call","params":{}}"#,
            r#"{"method":"elicitation/create","params":{}}"#,
            r#"{"method":"elicitation/create","params":[1]}"#,
            r#"{"method":"roots/list","id":1}"#,
            r#"{"method":7}"#,
        ] {
            assert!(InputRequest::parse(bad).is_err(), "{bad}");
        }
        let long = format!(
            r#"{{"method":"elicitation/create","params":{{"message":"{}"}}}}"#,
            "é".repeat(500)
        );
        assert_eq!(request(&long).summary().chars().count(), 200);
    }

    #[test]
    fn keys_are_bounded_and_printable() {
        assert!(InputKey::parse("confirm-delete").is_ok());
        assert!(InputKey::parse("").is_err());
        assert!(InputKey::parse(&"k".repeat(257)).is_err());
        assert!(InputKey::parse("a\nb").is_err());
    }

    #[test]
    fn asking_a_key_again_finds_its_answer_or_keeps_waiting() {
        let asked = question("confirm", confirm(), None);
        let answered = question("confirm", confirm(), Some(r#"{"action":"accept"}"#));
        assert_eq!(ask(None, &confirm(), 0), Ok(AskStep::Ask));
        assert_eq!(ask(Some(&asked), &confirm(), 1), Ok(AskStep::Waiting));
        assert_eq!(
            ask(Some(&answered), &confirm(), 1),
            Ok(AskStep::Answered(
                JsonObject::parse(r#"{"action":"accept"}"#).expect("json")
            ))
        );
        let respaced = request(
            r#"{ "params" : {"requestedSchema":{"properties":{},"type":"object"},"message":"Delete 3 files?"}, "method":"elicitation/create"}"#,
        );
        assert_eq!(
            ask(Some(&asked), &respaced, 1),
            Ok(AskStep::Waiting),
            "the same request"
        );
        let other =
            request(r#"{"method":"elicitation/create","params":{"message":"Delete 4 files?"}}"#);
        assert_eq!(
            ask(Some(&answered), &other, 1),
            Err(QuestionRefusal::KeyReused("confirm".into()))
        );
        assert_eq!(
            ask(None, &confirm(), MAX_QUESTIONS),
            Err(QuestionRefusal::TooMany(MAX_QUESTIONS))
        );
    }

    #[test]
    fn only_open_questions_take_answers_once_each() {
        let questions = [
            question("a", confirm(), None),
            question("b", confirm(), Some("{}")),
            question("c", confirm(), None),
        ];
        let key = |k: &str| InputKey::parse(k).expect("key");
        let given = [key("a"), key("b"), key("zz"), key("a")];
        let answering = answering(&questions, &given);
        assert_eq!(answering.taken, vec![key("a")]);
        assert_eq!(answering.ignored, vec![key("b"), key("zz"), key("a")]);
    }

    #[test]
    fn the_status_says_what_is_asked_until_all_is_answered() {
        let (a, b) = (confirm(), request(r#"{"method":"roots/list"}"#));
        assert_eq!(
            waiting_status(&[&a]),
            (TaskStatus::InputRequired, "Delete 3 files?".into())
        );
        assert_eq!(
            waiting_status(&[&a, &b, &b]),
            (
                TaskStatus::InputRequired,
                "Delete 3 files? (and 2 more input requests)".into()
            )
        );
        assert_eq!(waiting_status(&[]).0, TaskStatus::Working);
        assert_eq!(after_answers(1, true), AfterAnswers::StillWaiting);
        assert_eq!(after_answers(0, false), AfterAnswers::Continue);
        assert_eq!(after_answers(0, true), AfterAnswers::Redispatch);
    }
}
