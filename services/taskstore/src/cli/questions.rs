//! A task's questions in the CLI: `get` and `watch` show the open ones
//! (text: a line each with how to answer it; JSON: `inputRequests` as MCP's
//! 2026-07-28 `tasks/get` inlines them), and `answer` answers one.

use std::collections::BTreeSet;
use std::io::Write;

use serde_json::{Map, Value, json};

use super::exit::{ClientError, Exit};
use super::input::{Inputs, task_id_arg};
use super::list::shell_quote;
use super::output::print_json;
use crate::domain::{InputKey, JsonObject, Question, Scope, Task, TaskId, TaskStatus};
use crate::grpc::GrpcTaskStore;
use crate::store::QuestionStore;

/// What `answer` was given.
#[derive(Debug)]
pub(super) enum Given {
    /// The whole answer, as JSON text (or `@FILE`, `-`).
    Raw(String),
    /// An elicitation accepted with this content.
    Accept(String),
    Decline,
    Dismiss,
}

/// What an accepted answer looks like, for error messages.
const ANSWER_EXAMPLE: &str = r#"{"action":"accept","content":{"confirm":true}}"#;

impl Given {
    fn into_answer(self) -> Result<JsonObject, ClientError> {
        let mut inputs = Inputs::default();
        let text = match self {
            Given::Raw(raw) => inputs.json("ANSWER", &raw, ANSWER_EXAMPLE)?,
            Given::Accept(raw) => {
                let content = inputs.json("--accept", &raw, r#"{"confirm":true}"#)?;
                let content: Value = serde_json::from_str(&content)
                    .map_err(|err| ClientError::Usage(format!("--accept: {err}")))?;
                if !content.is_object() {
                    return Err(ClientError::Usage(
                        "--accept takes the content as a JSON object".to_owned(),
                    ));
                }
                json!({"action": "accept", "content": content}).to_string()
            }
            Given::Decline => json!({"action": "decline"}).to_string(),
            Given::Dismiss => json!({"action": "cancel"}).to_string(),
        };
        JsonObject::parse(text).map_err(|err| {
            ClientError::Usage(format!(
                "the answer {err}, e.g. '{ANSWER_EXAMPLE}', or --accept/--decline/--dismiss"
            ))
        })
    }
}

/// `taskstore answer TASK KEY …`.
pub(super) async fn answer(
    store: &GrpcTaskStore,
    scope: &Scope,
    raw_id: &str,
    raw_key: &str,
    given: Given,
    json_output: bool,
) -> Result<Exit, ClientError> {
    let id = task_id_arg(raw_id)?;
    let key =
        InputKey::parse(raw_key).map_err(|err| ClientError::Usage(format!("the key {err}")))?;
    let answer = given.into_answer()?;
    let answered = store
        .answer_questions(scope, &id, vec![(key.clone(), answer)])
        .await
        .map_err(ClientError::about(&id))?;
    if answered.taken.is_empty() {
        let open = store
            .questions(scope, &id)
            .await
            .map_err(ClientError::about(&id))?
            .into_iter()
            .filter(|q| q.answer.is_none())
            .map(|q| q.key.to_string())
            .collect::<Vec<_>>();
        let open = if open.is_empty() {
            "it asks nothing now".to_owned()
        } else {
            format!("it asks {}", open.join(", "))
        };
        return Err(ClientError::Failed(format!(
            "task {id} has no open question {key} (answered before, or never asked): {open}"
        )));
    }
    if json_output {
        print_json(&json!({"task": answered.task, "taken": [key.as_str()]}))?;
    } else {
        writeln!(
            std::io::stdout().lock(),
            "answered {key}; task {id} is {}",
            answered.task.status
        )?;
    }
    Ok(Exit::Done)
}

/// The open questions of `task`, when it waits for any (one more call,
/// made only for a task that is `input_required`).
pub(super) async fn open_questions(
    store: &GrpcTaskStore,
    scope: &Scope,
    task: &Task,
) -> Result<Vec<Question>, ClientError> {
    if task.status != TaskStatus::InputRequired {
        return Ok(Vec::new());
    }
    let questions = store
        .questions(scope, &task.task_id)
        .await
        .map_err(ClientError::about(&task.task_id))?;
    Ok(questions
        .into_iter()
        .filter(|q| q.answer.is_none())
        .collect())
}

/// The task as `--json` prints it, with its open questions inlined as
/// `inputRequests` (MCP 2026-07-28's shape) when it has any.
pub(super) fn task_json(task: &Task, open: &[Question]) -> Value {
    let mut value = serde_json::to_value(task).unwrap_or(Value::Null);
    if let (Value::Object(object), false) = (&mut value, open.is_empty()) {
        let requests: Map<String, Value> = open
            .iter()
            .map(|q| {
                let request =
                    serde_json::from_str(q.request.as_json().as_str()).unwrap_or(Value::Null);
                (q.key.to_string(), request)
            })
            .collect();
        object.insert("inputRequests".into(), Value::Object(requests));
    }
    value
}

/// One line per open question, with how to answer it.
pub(super) fn write_questions(
    out: &mut impl Write,
    task_id: &TaskId,
    open: &[Question],
) -> std::io::Result<()> {
    for question in open {
        writeln!(
            out,
            "asks {:<12}{} ({}; taskstore answer {task_id} {} …)",
            question.key.as_str(),
            question.request.summary(),
            question.request.method().as_str(),
            shell_quote(question.key.as_str()),
        )?;
    }
    Ok(())
}

/// For `watch`: the questions not shown yet.
#[derive(Debug, Default)]
pub(super) struct Shown(BTreeSet<String>);

impl Shown {
    pub(super) fn new_ones(&mut self, open: Vec<Question>) -> Vec<Question> {
        open.into_iter()
            .filter(|q| self.0.insert(q.key.to_string()))
            .collect()
    }
}
