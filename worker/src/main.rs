//! `taskworker`: serves built-in and command tools for a taskstore service.
//! `taskworker --help` lists every flag and its environment variable.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use taskstore_proto::jobs::Topology;
use taskworker::tools::{BUILTIN_TOOLS, CommandToolsFile, builtin};
use taskworker::{JobSource, Worker, WorkerConfig};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Parser)]
#[command(
    name = "taskworker",
    version,
    about = "Runs dispatched MCP tasks for a taskstore service."
)]
struct Args {
    /// The taskstore gRPC endpoint.
    #[arg(
        long,
        env = "TASKWORKER_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    endpoint: String,
    /// RabbitMQ URL the jobs come from.
    #[arg(
        long,
        env = "TASKWORKER_AMQP_URL",
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    amqp_url: String,
    /// Built-in tools to serve, comma-separated (echo, sleep, fail, hash, noop); `none` for none.
    #[arg(
        long,
        env = "TASKWORKER_TOOLS",
        default_value = "echo,sleep,fail,hash,noop",
        value_delimiter = ','
    )]
    tools: Vec<String>,
    /// A JSON file of command tools: {"tools": {"name": {"command": ["prog", "arg"], "grace": "5s"}}}.
    #[arg(long, env = "TASKWORKER_COMMAND_TOOLS")]
    command_tools: Option<PathBuf>,
    /// Prefix of the RabbitMQ exchange and queue names (the service's --queue-prefix).
    #[arg(long, env = "TASKWORKER_QUEUE_PREFIX", default_value = "taskstore")]
    queue_prefix: String,
    /// Attempts run at once.
    #[arg(long, env = "TASKWORKER_CONCURRENCY", default_value_t = 4)]
    concurrency: usize,
    /// This worker's name in status messages and logs (default: host and pid).
    #[arg(long, env = "TASKWORKER_ID")]
    worker_id: Option<String>,
    /// On SIGTERM/SIGINT, how long running attempts may take to finish
    /// before they are given back to other workers.
    #[arg(long, env = "TASKWORKER_SHUTDOWN_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// Log line format: text or json.
    #[arg(long, env = "TASKWORKER_LOG_FORMAT", default_value = "text")]
    log_format: String,
    /// Log filter, in RUST_LOG syntax.
    #[arg(long, env = "TASKWORKER_LOG", default_value = "info")]
    log_level: String,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(err) = init_logs(&args.log_format, &args.log_level) {
        eprintln!("error: {err}");
        return ExitCode::from(2);
    }
    match run(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "taskworker failed");
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let worker_id = args.worker_id.clone().unwrap_or_else(default_worker_id);
    let config = WorkerConfig {
        endpoint: args.endpoint,
        source: JobSource::RabbitMq {
            url: args.amqp_url,
            topology: Topology::new(&args.queue_prefix)
                .ok_or("--queue-prefix must be 1 to 128 of A-Z a-z 0-9 _ - . /")?,
        },
        worker_id,
        concurrency: args.concurrency,
        shutdown_grace: args.shutdown_grace,
    };
    let mut worker = Worker::new(config);
    for name in args
        .tools
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty() && *t != "none")
    {
        let tool = builtin(name).ok_or_else(|| {
            format!(
                "unknown built-in tool {name:?} (known: {})",
                BUILTIN_TOOLS.join(", ")
            )
        })?;
        worker = worker
            .with_tool(name, tool)
            .map_err(|err| err.to_string())?;
    }
    if let Some(path) = &args.command_tools {
        for (name, tool) in CommandToolsFile::load(path)?.into_tools()? {
            worker = worker
                .with_tool(&name, tool)
                .map_err(|err| err.to_string())?;
        }
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(taskworker::signals::cancel_on_signal(shutdown.clone()));
    worker.run(shutdown).await.map_err(|err| err.to_string())
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "worker".to_owned());
    format!("{host}/{}", std::process::id())
}

fn init_logs(format: &str, filter: &str) -> Result<(), String> {
    let filter = EnvFilter::try_new(filter).map_err(|err| format!("invalid log filter: {err}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        "text" => builder.try_init(),
        "json" => builder.json().flatten_event(true).try_init(),
        other => return Err(format!("unknown log format {other:?} (text or json)")),
    }
    .map_err(|err| err.to_string())
}
