//! The client commands of `taskstore` (create, get, list, update, complete,
//! result, cancel, cleanup): a person's way into a running service. They use
//! [`GrpcTaskStore`], the same client the conformance suite exercises.

mod output;

use std::time::Duration;

use clap::{Args, Subcommand};
use tokio_stream::StreamExt;

use crate::domain::{
    DispatchRequest, JsonObject, NewResult, NewTask, PageRequest, RequestId, ResultStatus, Scope,
    SessionId, StatusUpdate, TaskId, TaskStatus, TenantId, ToolName, Ttl,
};
use crate::error::StoreError;
use crate::grpc::GrpcTaskStore;
use crate::store::TaskStore;

use self::output::Output;

/// Options every client command takes.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The taskstore service to talk to.
    #[arg(
        long,
        env = "TASKSTORE_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    pub endpoint: String,
    /// Act within this session only.
    #[arg(long, env = "TASKSTORE_SESSION")]
    pub session: Option<String>,
    /// Print JSON (MCP field names) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a task.
    Create {
        #[command(flatten)]
        client: ClientArgs,
        /// The original JSON-RPC request, a JSON object.
        #[arg(long, conflicts_with_all = ["tool", "arguments"], required_unless_present = "tool")]
        request: Option<String>,
        /// Shorthand for a `tools/call` request of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// The tool's arguments (a JSON object), with --tool.
        #[arg(long, requires = "tool", default_value = "{}")]
        arguments: Option<String>,
        /// The JSON-RPC id of the request, as JSON (`7`, `"abc"`).
        #[arg(long, default_value = "1")]
        request_id: String,
        /// A caller-chosen task id.
        #[arg(long)]
        task_id: Option<String>,
        /// Requested retention (`10m`, `2h`); the server may shorten it.
        #[arg(long, value_parser = crate::config::parse_duration)]
        ttl: Option<Duration>,
        /// Run the task on a worker that serves the tool.
        #[arg(long)]
        dispatch: bool,
        /// With --dispatch: how many times the task may be started.
        #[arg(long, requires = "dispatch")]
        max_attempts: Option<u32>,
    },
    /// Print the task after every change until it is finished.
    Watch {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// Show a task.
    Get {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// List tasks, oldest first.
    List {
        #[command(flatten)]
        client: ClientArgs,
        /// Continue from this cursor.
        #[arg(long)]
        cursor: Option<String>,
        /// Tasks per page.
        #[arg(long)]
        page_size: Option<u32>,
        /// Follow cursors to the last page.
        #[arg(long)]
        all: bool,
    },
    /// Change a task's status (and status message).
    Update {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// working, input_required, completed, failed or cancelled.
        #[arg(long)]
        status: TaskStatus,
        #[arg(long)]
        message: Option<String>,
    },
    /// Store a task's result, completing (or with --failed, failing) it.
    Complete {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// The result, a JSON object (for a tool call, a CallToolResult).
        #[arg(long)]
        result: String,
        /// Store the result as failed.
        #[arg(long)]
        failed: bool,
        #[arg(long)]
        message: Option<String>,
    },
    /// Show a task's result.
    Result {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// Wait until the task is finished (MCP tasks/result).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long.
        #[arg(long, default_value = "10m", value_parser = crate::config::parse_duration)]
        timeout: Duration,
    },
    /// Cancel a task (a finished task is shown unchanged).
    Cancel {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// Delete expired tasks now.
    Cleanup {
        #[command(flatten)]
        client: ClientArgs,
    },
}

/// Why a client command failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach {endpoint}: {source}")]
    Connect {
        endpoint: String,
        source: tonic::transport::Error,
    },
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("cannot print: {0}")]
    Output(#[from] std::io::Error),
}

pub async fn run(command: ClientCommand) -> Result<(), ClientError> {
    let client_args = match &command {
        ClientCommand::Create { client, .. }
        | ClientCommand::Get { client, .. }
        | ClientCommand::Watch { client, .. }
        | ClientCommand::List { client, .. }
        | ClientCommand::Update { client, .. }
        | ClientCommand::Complete { client, .. }
        | ClientCommand::Result { client, .. }
        | ClientCommand::Cancel { client, .. }
        | ClientCommand::Cleanup { client } => client.clone(),
    };
    let out = Output::new(client_args.json);
    let scope = scope(client_args.session.as_deref())?;
    let store = GrpcTaskStore::connect(client_args.endpoint.clone())
        .await
        .map_err(|source| ClientError::Connect {
            endpoint: client_args.endpoint.clone(),
            source,
        })?;

    match command {
        ClientCommand::Create {
            request,
            tool,
            arguments,
            request_id,
            task_id,
            ttl,
            dispatch,
            max_attempts,
            ..
        } => {
            let request = match (request, tool) {
                (Some(request), _) => request,
                (None, Some(tool)) => {
                    tools_call(&tool, arguments.as_deref().unwrap_or("{}"), &request_id)?
                }
                (None, None) => {
                    return Err(StoreError::invalid("--request", "or --tool is required").into());
                }
            };
            let new_task = NewTask {
                task_id: task_id.as_deref().map(task_id_arg).transpose()?,
                ttl: ttl
                    .map(Ttl::from_duration)
                    .transpose()
                    .map_err(|err| StoreError::invalid("--ttl", err))?,
                request_id: RequestId::parse(request_id)
                    .map_err(|err| StoreError::invalid("--request-id", err))?,
                request: JsonObject::parse(request)
                    .map_err(|err| StoreError::invalid("--request", err))?,
                dispatch: None,
            };
            let new_task = NewTask {
                dispatch: dispatch
                    .then(|| dispatch_request(&new_task.request, max_attempts))
                    .transpose()?,
                ..new_task
            };
            out.task(&store.create_task(&scope, new_task).await?)?;
        }
        ClientCommand::Get { task_id, .. } => {
            out.task(&store.get_task(&scope, &task_id_arg(&task_id)?).await?)?
        }
        ClientCommand::List {
            cursor,
            page_size,
            all,
            ..
        } => {
            let mut page = store
                .list_tasks(&scope, PageRequest { cursor, page_size })
                .await?;
            // With --all, one listing (one JSON document) of every page.
            while let (true, Some(cursor)) = (all, page.next_cursor.take()) {
                let request = PageRequest {
                    cursor: Some(cursor),
                    page_size,
                };
                let next = store.list_tasks(&scope, request).await?;
                page.tasks.extend(next.tasks);
                page.next_cursor = next.next_cursor;
            }
            out.page(&page)?;
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
            out.task(
                &store
                    .update_status(&scope, &task_id_arg(&task_id)?, update)
                    .await?,
            )?;
        }
        ClientCommand::Complete {
            task_id,
            result,
            failed,
            message,
            ..
        } => {
            let result = NewResult {
                status: if failed {
                    ResultStatus::Failed
                } else {
                    ResultStatus::Completed
                },
                result: JsonObject::parse(result)
                    .map_err(|err| StoreError::invalid("--result", err))?,
                message,
                lease: None,
            };
            out.task(
                &store
                    .store_result(&scope, &task_id_arg(&task_id)?, result)
                    .await?,
            )?;
        }
        ClientCommand::Watch { task_id, .. } => {
            let mut watch = store.watch_task(&scope, &task_id_arg(&task_id)?).await?;
            while let Some(task) = watch.next().await {
                out.change(&task?)?;
            }
        }
        ClientCommand::Result {
            task_id,
            wait,
            timeout,
            ..
        } => {
            let id = task_id_arg(&task_id)?;
            let result = if wait {
                store.wait_for_result(&scope, &id, timeout).await?
            } else {
                store.get_result(&scope, &id).await?
            };
            out.result(&result)?
        }
        ClientCommand::Cancel { task_id, .. } => {
            out.task(&store.cancel_task(&scope, &task_id_arg(&task_id)?).await?)?
        }
        ClientCommand::Cleanup { .. } => out.deleted(store.cleanup_expired().await?)?,
    }
    Ok(())
}

/// Dispatch to the tool the request calls.
fn dispatch_request(
    request: &JsonObject,
    max_attempts: Option<u32>,
) -> Result<DispatchRequest, StoreError> {
    let tool = request.tools_call_name().ok_or_else(|| {
        StoreError::invalid("--dispatch", "needs a tools/call request (use --tool)")
    })?;
    let tool = ToolName::parse(&tool).map_err(|err| StoreError::invalid("tool", err))?;
    Ok(DispatchRequest { tool, max_attempts })
}

fn scope(session: Option<&str>) -> Result<Scope, StoreError> {
    let session = session
        .map(|s| SessionId::parse(s, usize::MAX))
        .transpose()
        .map_err(|err| StoreError::invalid("--session", err))?;
    Ok(Scope {
        tenant: TenantId::default_tenant(),
        session,
    })
}

fn task_id_arg(raw: &str) -> Result<TaskId, StoreError> {
    TaskId::parse(raw).map_err(|err| StoreError::invalid("task id", err))
}

/// A JSON-RPC `tools/call` request for `tool` with `arguments`.
fn tools_call(tool: &str, arguments: &str, request_id: &str) -> Result<String, StoreError> {
    let arguments: serde_json::Value =
        serde_json::from_str(arguments).map_err(|err| StoreError::invalid("--arguments", err))?;
    let id: serde_json::Value =
        serde_json::from_str(request_id).map_err(|err| StoreError::invalid("--request-id", err))?;
    let request = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": { "name": tool, "arguments": arguments, "task": {} },
    });
    Ok(request.to_string())
}
