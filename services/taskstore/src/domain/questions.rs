//! Questions a task asks its caller (MCP input requests) and their
//! answers: what a question is, and the decisions every backend takes the
//! same way: what asking a key does, which answers are taken, the task's
//! status and message while it waits, and what a parked task holds.
//! `docs/execution.md` explains the protocol around them.

use std::fmt;

use chrono::{DateTime, Utc};

use super::answers::{AnswerRefused, check_answer};
pub use super::asked::{InputMethod, InputRequest};
use super::execution::{DispatchChange, Effects};
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
/// may repeat itself, or answer a request superseded since). A taken
/// answer that does not answer its question (`answers::check_answer`)
/// refuses them all: nothing is stored and the question stays open.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answering {
    pub taken: Vec<InputKey>,
    pub ignored: Vec<InputKey>,
}

pub fn answering<'a>(
    questions: impl IntoIterator<Item = &'a Question>,
    given: &[(InputKey, JsonObject)],
) -> Result<Answering, AnswerRefused> {
    let open: Vec<&Question> = questions
        .into_iter()
        .filter(|q| q.answer.is_none())
        .collect();
    let mut answering = Answering::default();
    for (key, answer) in given {
        match open.iter().find(|q| &q.key == key) {
            Some(question) if !answering.taken.contains(key) => {
                check_answer(&question.request, answer)
                    .map_err(|refused| AnswerRefused(format!("answer to {key}: {refused}")))?;
                answering.taken.push(key.clone());
            }
            _ => answering.ignored.push(key.clone()),
        }
    }
    Ok(answering)
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

/// What the questions still waiting for an answer ask.
pub fn open_requests(questions: &[Question]) -> Vec<&InputRequest> {
    questions
        .iter()
        .filter(|q| q.answer.is_none())
        .map(|q| &q.request)
        .collect()
}

/// The status and message the `open` questions call for, as effects on a
/// task that now has `status` and `message`: none when it says so already.
pub fn waiting_effects(
    open: &[&InputRequest],
    status: TaskStatus,
    message: Option<&str>,
) -> Effects {
    let (next, text) = waiting_status(open);
    if status == next && message == Some(text.as_str()) {
        return Effects::default();
    }
    Effects {
        status: Some(next),
        message: Some(Some(text)),
        ..Effects::default()
    }
}

/// What answers just stored do to the task ([`after_answers`] decided
/// `step`): dispatched again, or the status the still `open` questions
/// call for. It changes either way, so that the attempt waiting for the
/// answers hears of them.
pub fn effects_after_answers(
    step: AfterAnswers,
    open: &[&InputRequest],
    status: TaskStatus,
    message: Option<&str>,
) -> Effects {
    match step {
        AfterAnswers::Redispatch => Effects {
            status: Some(TaskStatus::Working),
            message: Some(Some(RESUMED_MESSAGE.to_owned())),
            dispatch: DispatchChange::Again {
                after: std::time::Duration::ZERO,
            },
            ..Effects::default()
        },
        AfterAnswers::Continue | AfterAnswers::StillWaiting => {
            waiting_effects(open, status, message).or_touch()
        }
    }
}

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
        let yes = JsonObject::parse(r#"{"action":"accept","content":{}}"#).expect("json");
        let given: Vec<_> = ["a", "b", "zz", "a"]
            .into_iter()
            .map(|k| (key(k), yes.clone()))
            .collect();
        let answering = answering(&questions, &given).expect("valid answers");
        assert_eq!(answering.taken, vec![key("a")]);
        assert_eq!(answering.ignored, vec![key("b"), key("zz"), key("a")]);
        // One bad answer refuses them all, naming its key.
        let bad = JsonObject::parse(r#"{"action":"approve"}"#).expect("json");
        let refused =
            super::answering(&questions, &[(key("a"), yes), (key("c"), bad)]).expect_err("refused");
        assert!(refused.0.starts_with("answer to c: "), "{refused}");
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
