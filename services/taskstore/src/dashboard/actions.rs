//! What a viewer does from the dashboard: cancel (one, the selected, or
//! every unfinished task a filter matches, after a confirmation with the
//! count), delete, answer a question, run a tool, run a task again. Each is
//! an [`Operation`] checked against the rights table, goes through the same
//! store trait as gRPC and `/mcp`, is logged with who did it, and counted.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use serde_json::{Value, json};

use super::Board;
use super::params::{TaskQuery, pairs, selected_tasks, value};
use super::refused::Refused;
use super::render::{Nav, see_other, segment};
use super::viewer::Viewer;
use crate::domain::{
    DispatchRequest, InputKey, JsonObject, MAX_SEARCH_PAGE, NewTask, Operation, RequestId,
    RetryPolicy, Scope, SearchPage, TaskId, ToolDescription, ToolName, TtlRequest,
};

/// Statuses a cancel can still change.
const UNFINISHED: [crate::domain::TaskStatus; 2] = [
    crate::domain::TaskStatus::Working,
    crate::domain::TaskStatus::InputRequired,
];
/// The most tasks one "cancel all matching" cancels.
pub const MAX_CANCEL_MATCHING: usize = 1000;
/// The most search pages one "cancel all matching" reads: with a filter few
/// tasks match, each page examines up to `SEARCH_SCAN_LIMIT` rows, so this
/// bounds the rows one request examines.
const MAX_MATCHING_PAGES: usize = 20;

/// The words of a notice named in a redirect (`?notice=cancelled-3`).
pub fn notice_text(raw: &str) -> String {
    match raw.split_once('-') {
        Some(("cancelled", count)) if count.parse::<usize>().is_ok() => {
            format!("Cancelled {count} tasks.")
        }
        _ => String::new(),
    }
}

fn scope(viewer: &Viewer) -> Scope {
    Scope {
        tenant: viewer.tenant.clone(),
        session: None,
    }
}

fn form(body: &Bytes) -> Result<Vec<(String, String)>, Refused> {
    std::str::from_utf8(body)
        .map_err(|_| Refused::BadRequest("the form is not UTF-8".into()))
        .and_then(|raw| pairs(raw).map_err(Refused::BadRequest))
}

fn logged(viewer: &Viewer, action: &'static str, task: &str) {
    tracing::info!(
        subject = %viewer.caller.subject,
        tenant = viewer.tenant.as_str(),
        action,
        task,
        "dashboard action"
    );
    crate::metrics::dashboard_action(action);
}

pub async fn cancel_one(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    board
        .act(viewer, Operation::CancelTask, async |viewer| {
            let id = TaskId::parse(&id).map_err(|_| Refused::NotFound)?;
            board.store.cancel_task(&scope(viewer), &id).await?;
            logged(viewer, "cancel", id.as_str());
            Ok(see_other(&format!(
                "{}/tasks/{}",
                board.base(),
                segment(id.as_str())
            )))
        })
        .await
}

pub async fn cancel_selected(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    body: Bytes,
) -> Response {
    board
        .act(viewer, Operation::CancelTask, async |viewer| {
            let ids = selected_tasks(&form(&body)?).map_err(Refused::BadRequest)?;
            let cancelled = cancel_each(&board, viewer, &ids).await?;
            Ok(see_other(&format!(
                "{}/tasks?notice=cancelled-{cancelled}",
                board.base()
            )))
        })
        .await
}

/// Cancels each task; a task gone or finished meanwhile is skipped.
async fn cancel_each(board: &Board, viewer: &Viewer, ids: &[TaskId]) -> Result<usize, Refused> {
    let mut cancelled = 0;
    for id in ids {
        match board.store.cancel_task(&scope(viewer), id).await {
            Ok(task) if task.status == crate::domain::TaskStatus::Cancelled => {
                logged(viewer, "cancel", id.as_str());
                cancelled += 1;
            }
            Ok(_) | Err(crate::error::StoreError::NotFound) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(cancelled)
}

/// The unfinished tasks a filter matches, at most [`MAX_CANCEL_MATCHING`]
/// (and whether more match).
async fn unfinished_matching(
    board: &Board,
    viewer: &Viewer,
    query: &TaskQuery,
) -> Result<(Vec<TaskId>, bool), Refused> {
    let mut search = query.search.clone();
    search.statuses = if search.statuses.is_empty() {
        UNFINISHED.to_vec()
    } else {
        search.statuses.retain(|status| UNFINISHED.contains(status));
        if search.statuses.is_empty() {
            return Ok((Vec::new(), false));
        }
        search.statuses
    };
    let mut ids = Vec::new();
    let mut page = SearchPage::new(Some(MAX_SEARCH_PAGE), None);
    for _ in 0..MAX_MATCHING_PAGES {
        let results = board
            .insights
            .search_tasks(&viewer.tenant, &search, &page)
            .await?;
        ids.extend(results.tasks.into_iter().map(|task| task.task_id));
        if ids.len() >= MAX_CANCEL_MATCHING {
            ids.truncate(MAX_CANCEL_MATCHING);
            return Ok((ids, true));
        }
        match results.next {
            Some(next) => page = SearchPage::new(Some(MAX_SEARCH_PAGE), Some(next)),
            None => return Ok((ids, false)),
        }
    }
    // More may match beyond the rows examined: say so ("or more").
    Ok((ids, true))
}

pub async fn confirm_cancel_matching(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
) -> Response {
    board
        .page(
            viewer,
            Operation::CancelTask,
            "Cancel matching tasks",
            Nav::Tasks,
            async |viewer| {
                let query =
                    TaskQuery::parse(raw.as_deref().unwrap_or("")).map_err(Refused::BadRequest)?;
                let (ids, capped) = unfinished_matching(&board, viewer, &query).await?;
                Ok(super::pages::tasks::confirm_cancel_matching(
                    board.base(),
                    &query,
                    ids.len(),
                    capped,
                ))
            },
        )
        .await
}

pub async fn cancel_matching(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    RawQuery(raw): RawQuery,
    body: Bytes,
) -> Response {
    board
        .act(viewer, Operation::CancelTask, async |viewer| {
            let query =
                TaskQuery::parse(raw.as_deref().unwrap_or("")).map_err(Refused::BadRequest)?;
            // No more than the confirmation page counted: tasks that began
            // to match since are not cancelled unseen.
            let expected: usize = value(&form(&body)?, "expected")
                .and_then(|raw| raw.parse().ok())
                .ok_or_else(|| {
                    Refused::BadRequest(
                        "expected: missing; confirm on the confirmation page".into(),
                    )
                })?;
            let (mut ids, _) = unfinished_matching(&board, viewer, &query).await?;
            ids.truncate(expected);
            let cancelled = cancel_each(&board, viewer, &ids).await?;
            // Back to the same filtered list, with the notice.
            let filter = raw
                .as_deref()
                .map(|raw| {
                    raw.split('&')
                        .filter(|pair| !pair.is_empty() && !pair.starts_with("notice="))
                        .map(|pair| format!("&{pair}"))
                        .collect::<String>()
                })
                .unwrap_or_default();
            Ok(see_other(&format!(
                "{}/tasks?notice=cancelled-{cancelled}{filter}",
                board.base()
            )))
        })
        .await
}

pub async fn delete_one(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    board
        .act(viewer, Operation::DeleteTask, async |viewer| {
            let id = TaskId::parse(&id).map_err(|_| Refused::NotFound)?;
            board.store.delete_task(&scope(viewer), &id).await?;
            logged(viewer, "delete", id.as_str());
            Ok(see_other(&format!("{}/tasks", board.base())))
        })
        .await
}

pub async fn answer(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    board
        .act(viewer, Operation::AnswerQuestions, async |viewer| {
            let id = TaskId::parse(&id).map_err(|_| Refused::NotFound)?;
            let form = form(&body)?;
            let key =
                value(&form, "key").ok_or_else(|| Refused::BadRequest("key: missing".into()))?;
            let key = InputKey::parse(key)
                .map_err(|err| Refused::BadRequest(format!("key {}", err.0)))?;
            let questions = board.store.questions(&scope(viewer), &id).await?;
            let question = questions
                .iter()
                .find(|question| question.key == key)
                .ok_or_else(|| Refused::BadRequest("no such question".into()))?;
            let answer = answer_of(&question.request, &form)?;
            if answer.as_str().len() > board.limits.max_json_bytes {
                return Err(Refused::BadRequest(format!(
                    "the answer is larger than {} bytes",
                    board.limits.max_json_bytes
                )));
            }
            board
                .store
                .answer_questions(&scope(viewer), &id, vec![(key, answer)])
                .await?;
            logged(viewer, "answer", id.as_str());
            Ok(see_other(&format!(
                "{}/tasks/{}",
                board.base(),
                segment(id.as_str())
            )))
        })
        .await
}

/// The client's result for a question from its answer form: an
/// elicitation accepted with its fields typed by its schema, or declined;
/// any other request's result as the JSON object typed in.
fn answer_of(
    request: &crate::domain::InputRequest,
    form: &[(String, String)],
) -> Result<JsonObject, Refused> {
    let result = match value(form, "action") {
        Some("decline") => json!({ "action": "decline" }),
        Some("accept") => {
            let asked: Value = serde_json::from_str(request.as_json().as_str()).unwrap_or_default();
            let properties = asked
                .pointer("/params/requestedSchema/properties")
                .and_then(Value::as_object);
            let content = super::pages::tools::filled(properties, "field", form)
                .map_err(Refused::BadRequest)?;
            json!({ "action": "accept", "content": content })
        }
        _ => {
            let raw = value(form, "result")
                .ok_or_else(|| Refused::BadRequest("result: missing".into()))?;
            return JsonObject::parse(raw)
                .map_err(|err| Refused::BadRequest(format!("result {}", err.0)));
        }
    };
    JsonObject::parse(result.to_string()).map_err(|err| Refused::BadRequest(err.0))
}

pub async fn run_tool(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    board
        .act(viewer, Operation::CreateTask, async |viewer| {
            let tool = ToolName::parse(&name).map_err(|_| Refused::NotFound)?;
            let (tools, _) = board.tools(viewer).await?;
            let served = tools
                .iter()
                .find(|served| served.name == tool)
                .ok_or(Refused::NotFound)?;
            let form = form(&body)?;
            let arguments = match value(&form, "arguments") {
                Some(raw) => serde_json::from_str::<Value>(raw)
                    .ok()
                    .filter(Value::is_object)
                    .ok_or_else(|| {
                        Refused::BadRequest("arguments: must be a JSON object".into())
                    })?,
                None => {
                    let schema: Value =
                        serde_json::from_str(served.description.input_schema.as_str())
                            .unwrap_or_default();
                    let properties = schema.get("properties").and_then(Value::as_object);
                    Value::Object(
                        super::pages::tools::filled(properties, "arg", &form)
                            .map_err(Refused::BadRequest)?,
                    )
                }
            };
            let id = create(&board, viewer, tool, arguments, Some(&served.description)).await?;
            logged(viewer, "run", id.as_str());
            Ok(see_other(&format!(
                "{}/tasks/{}",
                board.base(),
                segment(id.as_str())
            )))
        })
        .await
}

/// Ends a key's pause now (`taskstore lift-pause`, LiftPause): an operator
/// of every tenant, from a tool's page.
pub async fn lift_pause(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    board
        .act(viewer, Operation::SteerDispatch, async |viewer| {
            let tool = ToolName::parse(&name).map_err(|_| Refused::NotFound)?;
            let form = form(&body)?;
            // As sent, untrimmed: the whole tool's key is the empty one.
            let key = form
                .iter()
                .find(|(name, _)| name == "key")
                .map(|(_, key)| key.as_str())
                .ok_or_else(|| Refused::BadRequest("key: missing".into()))?;
            if key.len() > crate::domain::KeyLimit::MAX_KEY_BYTES {
                return Err(Refused::BadRequest("key: longer than any key".into()));
            }
            let lifted = board.operations.lift_pause(tool.as_str(), key).await?;
            tracing::info!(
                subject = %viewer.caller.subject,
                action = "lift-pause",
                tool = %tool,
                lifted,
                "dashboard action"
            );
            crate::metrics::dashboard_action("lift-pause");
            Ok(see_other(&format!(
                "{}/tools/{}",
                board.base(),
                segment(tool.as_str())
            )))
        })
        .await
}

pub async fn rerun(
    State(board): State<Arc<Board>>,
    viewer: Viewer,
    Path(id): Path<String>,
) -> Response {
    board
        .act(viewer, Operation::CreateTask, async |viewer| {
            let id = TaskId::parse(&id).map_err(|_| Refused::NotFound)?;
            let details = board.insights.task_details(&viewer.tenant, &id).await?;
            let tool =
                details.task.tool.clone().ok_or_else(|| {
                    Refused::BadRequest("this task runs no tool of the fleet".into())
                })?;
            let request: Value = serde_json::from_str(&details.request_json).unwrap_or_default();
            let arguments = request
                .pointer("/params/arguments")
                .cloned()
                .unwrap_or_else(|| json!({}));
            // What its tool declares now (the service's defaults when no
            // worker serves it).
            let (tools, _) = board.tools(viewer).await?;
            let declared = tools
                .into_iter()
                .find(|served| served.name == tool)
                .map(|served| served.description);
            let new_id = create(&board, viewer, tool, arguments, declared.as_ref()).await?;
            logged(viewer, "rerun", new_id.as_str());
            Ok(see_other(&format!(
                "{}/tasks/{}",
                board.base(),
                segment(new_id.as_str())
            )))
        })
        .await
}

/// Creates a task running `tool` with `arguments` on the fleet, as a
/// `tools/call` request the dashboard made (its id says so), under the
/// tenant's admission like any other create.
async fn create(
    board: &Board,
    viewer: &Viewer,
    tool: ToolName,
    arguments: Value,
    declared: Option<&ToolDescription>,
) -> Result<TaskId, Refused> {
    board
        .admissions
        .admit_create(&viewer.tenant)
        .map_err(|refused| Refused::Unavailable(refused.message))?;
    let request_id = format!(
        "dashboard-{}",
        TaskId::generate().map_err(|_| Refused::Internal)?
    );
    let request = json!({
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": { "name": tool.as_str(), "arguments": arguments },
    });
    let request =
        JsonObject::parse(request.to_string()).map_err(|err| Refused::BadRequest(err.0))?;
    if request.as_str().len() > board.limits.max_json_bytes {
        return Err(Refused::BadRequest("the arguments are too large".into()));
    }
    let mut dispatch = DispatchRequest {
        fairness: None,
        rate: None,
        concurrency: None,
        start: None,
        tool,
        max_attempts: None,
        retry: RetryPolicy::default(),
        priority: Default::default(),
    };
    if let Some(declared) = declared {
        declared.apply_to(&mut dispatch);
    }
    let new = NewTask {
        task_id: None,
        ttl: TtlRequest::ServerDefault,
        poll_interval: None,
        request_id: RequestId::parse(Value::String(request_id).to_string())
            .map_err(|_| Refused::Internal)?,
        request,
        dispatch: Some(dispatch),
        trace_context: None,
        // A rerun is a new task each time it is asked for.
        idempotency_key: None,
    };
    let task = board.store.create_task(&scope(viewer), new).await?;
    Ok(task.task_id)
}
