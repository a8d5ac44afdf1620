//! The client commands' flags. Values are parsed into domain types in the
//! commands themselves, where a bad value can be explained in context.

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::domain::TaskStatus;

/// What every client command's exit status means; shown in `--help`.
pub const EXIT_STATUSES: &str = "\
Exit status:
  0  done (for result and watch: the task completed)
  1  an error (the message says which)
  2  a usage error: a flag is missing or malformed
  3  the task failed (result, watch)
  4  the task was cancelled (result, watch)
  5  no such task (missing, expired, or another session's)
  6  the task has not finished (result without --wait, or --timeout ran out)
  7  the service is unreachable, or unavailable for now: retry
  8  the service is up but degraded (status)";

/// Options every client command takes.
#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// The taskstore service: http://HOST:PORT, or https://HOST:PORT for
    /// TLS (a bare HOST:PORT means http).
    #[arg(
        long,
        env = "TASKSTORE_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    pub endpoint: String,
    /// Act within this session only.
    #[arg(long, env = "TASKSTORE_SESSION")]
    pub session: Option<String>,
    /// The API key to present (a service run with --auth api-keys needs
    /// one); prefer --token-file or the variable over the flag, which other
    /// users of the machine can see.
    #[arg(long, env = "TASKSTORE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// A file holding the API key (e.g. a mounted Kubernetes Secret).
    #[arg(long, env = "TASKSTORE_TOKEN_FILE")]
    pub token_file: Option<std::path::PathBuf>,
    /// The tenant to act in, for a key that reaches every tenant (an
    /// operator's admin key); other keys act in their own tenant.
    #[arg(long, env = "TASKSTORE_TENANT")]
    pub tenant: Option<String>,
    /// Trust this CA (PEM) for an https:// endpoint, instead of the public
    /// web roots.
    #[arg(long, env = "TASKSTORE_CA_CERT", value_name = "PATH")]
    pub ca_cert: Option<std::path::PathBuf>,
    /// Present this certificate (PEM) to a service run with --auth mtls;
    /// with --client-key.
    #[arg(
        long,
        env = "TASKSTORE_CLIENT_CERT",
        value_name = "PATH",
        requires = "client_key"
    )]
    pub client_cert: Option<std::path::PathBuf>,
    /// The private key of --client-cert (PEM).
    #[arg(
        long,
        env = "TASKSTORE_CLIENT_KEY",
        value_name = "PATH",
        requires = "client_cert"
    )]
    pub client_key: Option<std::path::PathBuf>,
    /// Print JSON instead of text: one compact document per line, with MCP's
    /// field names.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Create a task. Without --dispatch nothing runs it: the caller reports
    /// its progress and result (update, complete).
    #[command(after_help = EXIT_STATUSES)]
    Create {
        #[command(flatten)]
        client: ClientArgs,
        #[command(flatten)]
        task: CreateArgs,
    },
    /// Print the task after every change until it is finished; exits with
    /// the task's outcome.
    #[command(after_help = EXIT_STATUSES)]
    Watch {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// Show a task.
    #[command(after_help = EXIT_STATUSES)]
    Get {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// List tasks, oldest first, a page at a time.
    #[command(after_help = EXIT_STATUSES)]
    List {
        #[command(flatten)]
        client: ClientArgs,
        /// Only tasks in these statuses (comma-separated or repeated).
        #[arg(long, value_delimiter = ',')]
        status: Vec<TaskStatus>,
        /// Only tasks of this tool.
        #[arg(long)]
        tool: Option<String>,
        /// Continue from this cursor (printed after a page that has more).
        #[arg(long)]
        cursor: Option<String>,
        /// Tasks per page (the service's default when unset).
        #[arg(long)]
        page_size: Option<u32>,
        /// Follow cursors to the last page.
        #[arg(long, conflicts_with = "cursor")]
        all: bool,
    },
    /// Change a task's status (and status message).
    #[command(after_help = EXIT_STATUSES)]
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
    #[command(after_help = EXIT_STATUSES)]
    Complete {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// The result, a JSON object (for a tool call, a CallToolResult);
        /// `@FILE` reads a file, `-` standard input.
        #[arg(long)]
        result: String,
        /// Store the result as failed.
        #[arg(long)]
        failed: bool,
        #[arg(long)]
        message: Option<String>,
    },
    /// Show a task's result; exits with the task's outcome.
    #[command(after_help = EXIT_STATUSES)]
    Result {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// Wait until the task is finished (MCP tasks/result).
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long.
        #[arg(long, default_value = "10m", value_parser = crate::durations::parse_duration)]
        timeout: Duration,
    },
    /// Cancel a task (a finished task is shown unchanged).
    #[command(after_help = EXIT_STATUSES)]
    Cancel {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// Delete a task and its result now, whatever its status (a running
    /// attempt is not stopped: cancel first to stop it).
    #[command(after_help = EXIT_STATUSES)]
    Delete {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
    },
    /// Answer a question a task asks (an MCP input request it is
    /// input_required for); `get` and `watch` show its questions.
    #[command(after_help = EXIT_STATUSES)]
    Answer {
        #[command(flatten)]
        client: ClientArgs,
        task_id: String,
        /// The question's key.
        key: String,
        /// The answer as the MCP client would send it (an ElicitResult such
        /// as `{"action":"accept","content":{…}}`, a CreateMessageResult, a
        /// ListRootsResult): JSON, `@FILE`, or `-` for standard input.
        #[arg(required_unless_present_any = ["accept", "decline", "dismiss"], conflicts_with_all = ["accept", "decline", "dismiss"])]
        answer: Option<String>,
        /// Accept an elicitation with this content (a JSON object, `@FILE`
        /// or `-`; `{}` when none is asked for).
        #[arg(long, value_name = "CONTENT", num_args = 0..=1, default_missing_value = "{}")]
        accept: Option<String>,
        /// Decline an elicitation.
        #[arg(long, conflicts_with_all = ["accept", "dismiss"])]
        decline: bool,
        /// Dismiss an elicitation without a choice (MCP's `cancel` action).
        #[arg(long, conflicts_with = "accept")]
        dismiss: bool,
    },
    /// Delete expired tasks now.
    #[command(after_help = EXIT_STATUSES)]
    Cleanup {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Lift a key's back-off pause now (`status` lists the pauses): the
    /// key's waiting tasks go at once. Admin credentials of every tenant.
    #[command(after_help = EXIT_STATUSES)]
    LiftPause {
        #[command(flatten)]
        client: ClientArgs,
        /// The tool.
        #[arg(long)]
        tool: String,
        /// The key as `status` shows it (leave it out for the whole tool).
        #[arg(long, default_value = "")]
        key: String,
    },
    /// The health of the service and of what it depends on: database, job
    /// queue, outbox, and the workers seen per tool.
    #[command(after_help = EXIT_STATUSES)]
    Status {
        #[command(flatten)]
        client: ClientArgs,
        /// Also require that workers serve these tools (comma-separated or
        /// repeated).
        #[arg(long, value_delimiter = ',')]
        tool: Vec<String>,
        /// Wait up to this long for the service to answer and be healthy
        /// (for scripts that start it), e.g. `30s`.
        #[arg(long, value_parser = crate::durations::parse_duration)]
        wait: Option<Duration>,
        /// The service only stores tasks (nothing is dispatched): no
        /// worker is expected, so none reporting is no problem.
        #[arg(long, conflicts_with = "tool")]
        without_workers: bool,
    },
}

/// What `create` makes: a request (or a tool and its arguments) and how
/// the task is kept and run.
#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    /// The original JSON-RPC request, a JSON object; `@FILE` reads a
    /// file, `-` standard input.
    #[arg(long, conflicts_with_all = ["tool", "arguments"])]
    pub request: Option<String>,
    /// Shorthand for a `tools/call` request of this tool.
    #[arg(long)]
    pub tool: Option<String>,
    /// The tool's arguments (a JSON object), with --tool; `@FILE` reads
    /// a file, `-` standard input.
    #[arg(long, requires = "tool")]
    pub arguments: Option<String>,
    /// The JSON-RPC id of the request, as JSON (`7`, `"abc"`).
    #[arg(long, default_value = "1")]
    pub request_id: String,
    /// A caller-chosen task id.
    #[arg(long)]
    pub task_id: Option<String>,
    /// Requested retention (`10m`, `2h`); the server may shorten it.
    #[arg(long)]
    pub ttl: Option<String>,
    /// Run the task on a worker that serves the tool.
    #[arg(long)]
    pub dispatch: bool,
    /// With --dispatch: how many times the task may be started.
    #[arg(long, requires = "dispatch")]
    pub max_attempts: Option<u32>,
    /// With --dispatch: start the task at this time (RFC 3339, e.g.
    /// 2026-12-01T14:00:00Z), not before; until then it waits, `working`.
    #[arg(
        long,
        requires = "dispatch",
        conflicts_with = "start_after",
        value_name = "TIME"
    )]
    pub start_at: Option<String>,
    /// With --dispatch: start the task this long after its creation (`90s`,
    /// `10m`, `2h`), not before.
    #[arg(long, requires = "dispatch", value_name = "DURATION")]
    pub start_after: Option<String>,
    /// With --dispatch: its place in its tool's backlog, 0 (default) to 9;
    /// a higher one goes to the workers first.
    #[arg(long, requires = "dispatch", value_name = "0-9")]
    pub priority: Option<u32>,
    /// Makes the create safe to retry: while the task first created with
    /// this key lives (and for the service's idempotency retention), the same
    /// create returns that task instead of making another.
    #[arg(long, value_name = "KEY")]
    pub idempotency_key: Option<String>,
}

impl ClientCommand {
    pub fn client_args(&self) -> &ClientArgs {
        match self {
            ClientCommand::Create { client, .. }
            | ClientCommand::Get { client, .. }
            | ClientCommand::Watch { client, .. }
            | ClientCommand::List { client, .. }
            | ClientCommand::Update { client, .. }
            | ClientCommand::Complete { client, .. }
            | ClientCommand::Result { client, .. }
            | ClientCommand::Cancel { client, .. }
            | ClientCommand::Delete { client, .. }
            | ClientCommand::Answer { client, .. }
            | ClientCommand::Cleanup { client }
            | ClientCommand::LiftPause { client, .. }
            | ClientCommand::Status { client, .. } => client,
        }
    }
}
