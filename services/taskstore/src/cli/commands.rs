//! Each client command: parse its flags, connect, call, print.

use std::time::Duration;

use tokio_stream::StreamExt;

use super::create::{new_task, warn_if_unserved};
use super::exit::{ClientError, Exit};
use super::input::{Inputs, task_id_arg, tool_arg};
use super::list::{Listing, list};
use super::output::{Output, print_json};
use super::questions;
use super::{Connection, scope};
use crate::config::{ClientArgs, ClientCommand};
use crate::domain::{
    JsonObject, NewResult, ResultStatus, Scope, StatusUpdate, TaskFilter, TaskId, TaskStatus,
};
use crate::error::StoreError;
use crate::grpc::GrpcTaskStore;
use crate::store::TaskStore;

/// What a valid `--result` looks like, for error messages.
const RESULT_EXAMPLE: &str = r#"{"content":[{"type":"text","text":"done"}]}"#;

pub(super) async fn run(
    command: ClientCommand,
    connection: &mut Connection,
    args: &ClientArgs,
) -> Result<Exit, ClientError> {
    let out = Output::new(args.json);
    let scope = scope(args.session.as_deref())?;
    match command {
        ClientCommand::Create { task, .. } => {
            let new_task = new_task(task)?;
            let store = connection.store().await?;
            let dispatched_to = new_task.dispatch.as_ref().map(|d| d.tool.clone());
            out.task(&store.create_task(&scope, new_task).await?)?;
            if let Some(tool) = dispatched_to {
                warn_if_unserved(store, &tool).await;
            }
            Ok(Exit::Done)
        }
        ClientCommand::Get { task_id, .. } => {
            on_one_task(connection, &scope, &task_id, Action::Get, out).await
        }
        ClientCommand::Update {
            task_id,
            status,
            message,
            ..
        } => {
            let update = StatusUpdate {
                status,
                message,
                lease: None,
            };
            on_one_task(connection, &scope, &task_id, Action::Update(update), out).await
        }
        ClientCommand::Complete {
            task_id,
            result,
            failed,
            message,
            ..
        } => {
            let text = Inputs::default().json("--result", &result, RESULT_EXAMPLE)?;
            let result = NewResult {
                status: if failed {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                },
                result: JsonObject::parse(text)
                    .map_err(|err| ClientError::Usage(format!("--result {err}")))?,
                message,
                lease: None,
            };
            on_one_task(connection, &scope, &task_id, Action::Complete(result), out).await
        }
        ClientCommand::Cancel { task_id, .. } => {
            on_one_task(connection, &scope, &task_id, Action::Cancel, out).await
        }
        ClientCommand::List {
            status,
            tool,
            cursor,
            page_size,
            all,
            ..
        } => {
            let tool = tool.as_deref().map(tool_arg).transpose()?;
            let listing = Listing {
                filter: TaskFilter::new(status, tool),
                page_size,
            };
            let store = connection.store().await?;
            list(store, &scope, &listing, cursor, all, args, out).await
        }
        ClientCommand::Watch { task_id, .. } => {
            let id = task_id_arg(&task_id)?;
            let store = connection.store().await?;
            let mut watch = store
                .watch_task(&scope, &id)
                .await
                .map_err(ClientError::about(&id))?;
            let mut last = None;
            let mut shown = questions::Shown::default();
            let mut seen_at = None;
            // Since when the service has been away, while it is.
            let mut away: Option<Outage> = None;
            loop {
                let task = match watch.next().await {
                    None => break,
                    Some(Ok(task)) => task,
                    // The service restarted (a rolling restart, a replica
                    // going away): follow the task on whichever answers.
                    Some(Err(StoreError::Unavailable(why))) => {
                        let outage = away.get_or_insert_with(|| Outage::began(&id, &why));
                        watch = rewatch(store, &scope, &id, outage).await?;
                        continue;
                    }
                    Some(Err(err)) => return Err(ClientError::about(&id)(err)),
                };
                away = None;
                // After a reconnection the first message repeats the task
                // as it is: a change already shown is not shown again.
                if seen_at.is_some_and(|at| task.last_updated_at <= at) {
                    continue;
                }
                seen_at = Some(task.last_updated_at);
                let open = questions::open_questions(store, &scope, &task).await?;
                if out.is_json() && !open.is_empty() {
                    print_json(&questions::task_json(&task, &open))?;
                } else {
                    out.change(&task)?;
                    let new = shown.new_ones(open);
                    questions::write_questions(&mut std::io::stdout().lock(), &id, &new)?;
                }
                last = Some(task.status);
            }
            Ok(last.map_or(Exit::Done, outcome))
        }
        ClientCommand::Result {
            task_id,
            wait,
            timeout,
            ..
        } => {
            let id = task_id_arg(&task_id)?;
            let store = connection.store().await?;
            result(store, &scope, &id, wait.then_some(timeout), out).await
        }
        ClientCommand::Delete { task_id, .. } => {
            let id = task_id_arg(&task_id)?;
            let store = connection.store().await?;
            store
                .delete_task(&scope, &id)
                .await
                .map_err(ClientError::about(&id))?;
            out.task_deleted(&id)?;
            Ok(Exit::Done)
        }
        ClientCommand::Answer {
            task_id,
            key,
            answer,
            accept,
            decline,
            dismiss,
            ..
        } => {
            let given = match (answer, accept, decline, dismiss) {
                (Some(raw), ..) => questions::Given::Raw(raw),
                (None, Some(content), ..) => questions::Given::Accept(content),
                (None, None, true, _) => questions::Given::Decline,
                (None, None, false, _) => questions::Given::Dismiss,
            };
            let store = connection.store().await?;
            questions::answer(store, &scope, &task_id, &key, given, args.json).await
        }
        ClientCommand::Cleanup { .. } => {
            let store = connection.store().await?;
            out.deleted(store.cleanup_expired().await?)?;
            Ok(Exit::Done)
        }
        ClientCommand::LiftPause { tool, key, .. } => {
            let store = connection.store().await?;
            let lifted = store.lift_pause(&tool, &key).await?;
            // As `status` names it.
            let shown = if key.is_empty() { "(whole tool)" } else { &key };
            if args.json {
                super::output::print_json(&serde_json::json!({ "lifted": lifted }))?;
            } else if lifted {
                println!("lifted: {tool} {shown} runs again");
            } else {
                println!("{tool} {shown} was not paused");
            }
            Ok(Exit::Done)
        }
        ClientCommand::Status {
            tool,
            wait,
            without_workers,
            ..
        } => {
            let tools = tool
                .iter()
                .map(|t| tool_arg(t))
                .collect::<Result<Vec<_>, _>>()?;
            let expected = super::status::Expected {
                tools,
                workers: !without_workers,
            };
            super::status::run(connection, args, &expected, wait).await
        }
    }
}

/// What a command does to one task, which it then prints.
enum Action {
    Get,
    Update(StatusUpdate),
    Complete(NewResult),
    Cancel,
}

/// Parses the task id, calls the service and prints the task.
async fn on_one_task(
    connection: &mut Connection,
    scope: &Scope,
    raw_id: &str,
    action: Action,
    out: Output,
) -> Result<Exit, ClientError> {
    let id = task_id_arg(raw_id)?;
    let store = connection.store().await?;
    let shows_questions = matches!(action, Action::Get);
    let task = match action {
        Action::Get => store.get_task(scope, &id).await,
        Action::Update(update) => store.update_status(scope, &id, update).await,
        Action::Complete(result) => store.store_result(scope, &id, result).await,
        Action::Cancel => store.cancel_task(scope, &id).await,
    }
    .map_err(ClientError::about(&id))?;
    let (open, execution) = if shows_questions {
        let open = questions::open_questions(store, scope, &task).await?;
        let execution = store
            .task_execution(scope, &id)
            .await
            .map_err(ClientError::about(&id))?;
        (open, execution.filter(super::output::worth_showing))
    } else {
        (Vec::new(), None)
    };
    if out.is_json() && (!open.is_empty() || execution.is_some()) {
        let mut json = questions::task_json(&task, &open);
        if let (Some(object), Some(execution)) = (json.as_object_mut(), &execution) {
            object.insert(
                "execution".into(),
                super::output::execution_json(&task, execution),
            );
        }
        print_json(&json)?;
    } else {
        out.task(&task)?;
        if let Some(execution) = &execution {
            out.execution(&task, execution)?;
        }
        questions::write_questions(&mut std::io::stdout().lock(), &id, &open)?;
    }
    Ok(Exit::Done)
}

/// The exit status that reports a finished task's outcome.
fn outcome(status: TaskStatus) -> Exit {
    match status {
        TaskStatus::Failed => Exit::TaskFailed,
        TaskStatus::Cancelled => Exit::TaskCancelled,
        TaskStatus::Completed | TaskStatus::Working | TaskStatus::InputRequired => Exit::Done,
    }
}

/// `result`: the stored result, or why there is none, as an exit status.
async fn result(
    store: &GrpcTaskStore,
    scope: &Scope,
    id: &TaskId,
    wait: Option<Duration>,
    out: Output,
) -> Result<Exit, ClientError> {
    let fetched = match wait {
        Some(timeout) => store.wait_for_result(scope, id, timeout).await,
        None => store.get_result(scope, id).await,
    };
    let refusal = match fetched {
        Ok(result) => {
            out.result(&result)?;
            return Ok(outcome(result.task.status));
        }
        Err(StoreError::FailedPrecondition(refusal)) => refusal,
        Err(other) => return Err(ClientError::about(id)(other)),
    };
    // No result to show: the task says why.
    let task = store
        .get_task(scope, id)
        .await
        .map_err(ClientError::about(id))?;
    match (task.status, wait) {
        (TaskStatus::Cancelled, _) => {
            out.without_result(&task)?;
            Ok(Exit::TaskCancelled)
        }
        (status @ (TaskStatus::Working | TaskStatus::InputRequired), Some(timeout)) => {
            Err(ClientError::NotFinished(format!(
                "timed out after {} waiting for task {id}: it is still {status}",
                humantime::format_duration(timeout)
            )))
        }
        (status @ (TaskStatus::Working | TaskStatus::InputRequired), None) => {
            Err(ClientError::NotFinished(format!(
                "task {id} is still {status}: its result is not ready (wait for it with --wait)"
            )))
        }
        (TaskStatus::Completed | TaskStatus::Failed, _) => {
            Err(ClientError::Store(StoreError::FailedPrecondition(refusal)))
        }
    }
}

/// How long `watch` looks for the service again after it went away.
const REWATCH_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// One absence of the service while `watch` follows a task: warned of once,
/// however many times a replica that answers goes away again at once.
struct Outage {
    until: tokio::time::Instant,
}

impl Outage {
    fn began(id: &crate::domain::TaskId, why: &str) -> Self {
        super::exit::report(
            super::exit::Label::Warning,
            &format!("the service went away ({why}); following task {id} again when it is back"),
        );
        Outage {
            until: tokio::time::Instant::now() + REWATCH_FOR,
        }
    }
}

/// The task's watch again, once a service answers (before the outage's end).
async fn rewatch(
    store: &crate::grpc::GrpcTaskStore,
    scope: &crate::domain::Scope,
    id: &crate::domain::TaskId,
    outage: &Outage,
) -> Result<crate::store::TaskWatch, ClientError> {
    let mut delay = std::time::Duration::from_millis(200);
    loop {
        tokio::time::sleep(delay).await;
        match store.watch_task(scope, id).await {
            Ok(watch) => return Ok(watch),
            Err(StoreError::Unavailable(why))
                if tokio::time::Instant::now() + delay < outage.until =>
            {
                tracing::debug!(error = %why, "service still away");
            }
            Err(StoreError::Unavailable(why)) => {
                return Err(ClientError::Store(StoreError::Unavailable(format!(
                    "the service did not come back within {} s to follow task {id} ({why})",
                    REWATCH_FOR.as_secs()
                ))));
            }
            Err(err) => return Err(ClientError::about(id)(err)),
        }
        delay = (delay * 2).min(std::time::Duration::from_secs(5));
    }
}
