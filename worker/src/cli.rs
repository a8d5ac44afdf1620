//! The `taskworker` command line: its flags, and running a worker from
//! them. `taskworker` serves the built-in and command tools; a binary that
//! serves tools of its own with the same flags (the conformance worker of
//! `worker/tests/conformance/`) calls [`main`] with them.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser};
use taskstore_proto::credentials::TokenSettings;
use taskstore_proto::endpoint::ClientTls;
use taskstore_proto::jobs::{QueueType, Topology};
use taskstore_telemetry::{LogFormat, Telemetry, metrics};
use tokio_util::sync::CancellationToken;

use crate::tools::register;
use crate::{JobSource, Tool, Worker, WorkerConfig};

/// A binary built on these flags: its name (in `--help`, logs and traces),
/// what it does, the built-in tools it serves unless `--tools` says
/// otherwise, and tools of its own, served besides those.
#[derive(Clone)]
pub struct Program {
    pub name: &'static str,
    pub about: &'static str,
    pub default_tools: &'static str,
    pub tools: Vec<(&'static str, Arc<dyn Tool>)>,
}

impl std::fmt::Debug for Program {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Program")
            .field("name", &self.name)
            .field(
                "tools",
                &self.tools.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// `taskworker`'s flags (and those of every [`Program`]).
#[derive(Debug, Parser)]
#[command(
    name = "taskworker",
    version,
    about = "Runs dispatched MCP tasks for a taskstore service."
)]
pub struct Args {
    /// The taskstore service: http://HOST:PORT, or https://HOST:PORT for
    /// TLS (a bare HOST:PORT means http).
    #[arg(
        long,
        env = "TASKWORKER_ENDPOINT",
        default_value = "http://127.0.0.1:50051"
    )]
    endpoint: String,
    /// RabbitMQ URL the jobs come from. For a cluster, one URL per node,
    /// comma-separated: the worker consumes from one and moves to the next
    /// when it goes away.
    #[arg(
        long,
        env = "TASKWORKER_AMQP_URL",
        hide_env_values = true,
        default_value = "amqp://guest:guest@127.0.0.1:5672/%2f"
    )]
    amqp_url: String,
    /// A file holding the RabbitMQ URL (with its password), instead of
    /// --amqp-url: e.g. a mounted Kubernetes Secret.
    #[arg(long, env = "TASKWORKER_AMQP_URL_FILE", value_name = "PATH")]
    amqp_url_file: Option<PathBuf>,
    /// Trust this CA (PEM) for an amqps:// URL, instead of the public web
    /// roots.
    #[arg(long, env = "TASKWORKER_AMQP_CA_CERT", value_name = "PATH")]
    amqp_ca_cert: Option<PathBuf>,
    /// Present this certificate (PEM) to a broker that verifies peers; with
    /// --amqp-client-key.
    #[arg(
        long,
        env = "TASKWORKER_AMQP_CLIENT_CERT",
        value_name = "PATH",
        requires = "amqp_client_key"
    )]
    amqp_client_cert: Option<PathBuf>,
    /// The private key of --amqp-client-cert (PEM).
    #[arg(
        long,
        env = "TASKWORKER_AMQP_CLIENT_KEY",
        value_name = "PATH",
        requires = "amqp_client_cert"
    )]
    amqp_client_key: Option<PathBuf>,
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
    /// The kind of tool queue to declare: `quorum` (replicated; survives the
    /// loss of a broker node) or `classic` (one node's; survives a restart,
    /// not the node's loss). Every worker of a prefix must say the same.
    #[arg(long, env = "TASKWORKER_QUEUE_TYPE", default_value = "quorum", value_parser = QueueType::parse)]
    queue_type: QueueType,
    /// Attempts run at once (at least 1).
    #[arg(long, env = "TASKWORKER_CONCURRENCY", default_value_t = 4, value_parser = at_least_one)]
    concurrency: usize,
    /// This worker's name in status messages and logs (default: host and pid).
    #[arg(long, env = "TASKWORKER_ID")]
    worker_id: Option<String>,
    /// On SIGTERM/SIGINT, how long running attempts may take to finish
    /// before they are given back to other workers.
    #[arg(long, env = "TASKWORKER_SHUTDOWN_GRACE", default_value = "30s", value_parser = humantime::parse_duration)]
    shutdown_grace: Duration,
    /// How long a tool's question may wait for its answer while the tool
    /// holds a slot; past it the attempt gives the task back, and the
    /// answer dispatches it again (to any worker).
    #[arg(long, env = "TASKWORKER_PARK_AFTER", default_value = "1m", value_parser = humantime::parse_duration)]
    park_after: Duration,
    /// The API key to present to the service (a worker key; `*` tenant for
    /// a fleet serving every tenant). Prefer --token-file.
    #[arg(long, env = "TASKWORKER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// A file holding the API key (e.g. a mounted Kubernetes Secret).
    #[arg(long, env = "TASKWORKER_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// Trust this CA (PEM) for an https:// endpoint, instead of the
    /// public web roots.
    #[arg(long, env = "TASKWORKER_CA_CERT", value_name = "PATH")]
    ca_cert: Option<PathBuf>,
    /// Present this certificate (PEM) to a service run with --auth mtls;
    /// with --client-key.
    #[arg(
        long,
        env = "TASKWORKER_CLIENT_CERT",
        value_name = "PATH",
        requires = "client_key"
    )]
    client_cert: Option<PathBuf>,
    /// The private key of --client-cert (PEM).
    #[arg(
        long,
        env = "TASKWORKER_CLIENT_KEY",
        value_name = "PATH",
        requires = "client_cert"
    )]
    client_key: Option<PathBuf>,
    /// Serve Prometheus metrics on GET /metrics at this address
    /// (HOST:PORT, e.g. 0.0.0.0:9090), with probes beside them: GET /livez,
    /// and GET /readyz (200 while consuming jobs); off unless set.
    #[arg(long, env = "TASKWORKER_METRICS_LISTEN")]
    metrics_listen: Option<String>,
    /// Log line format.
    #[arg(
        long,
        env = "TASKWORKER_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    log_format: LogFormat,
    /// Log filter, in RUST_LOG syntax.
    #[arg(long, env = "TASKWORKER_LOG", default_value = "info")]
    log_level: String,
}

/// Parses the command line as `program`'s, runs the worker until SIGTERM or
/// SIGINT, and says how it ended.
pub async fn main(program: Program) -> ExitCode {
    let matches = Args::command()
        .name(program.name)
        .bin_name(program.name)
        .about(program.about)
        .mut_arg("tools", |arg| arg.default_value(program.default_tools))
        .get_matches();
    let args = match Args::from_arg_matches(&matches) {
        Ok(args) => args,
        Err(err) => err.exit(),
    };
    let telemetry = match Telemetry::init(program.name, args.log_format, &args.log_level, &[]) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let exit = match run(args, program.tools).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!(error = %err, "{} stopped with an error", program.name);
            ExitCode::FAILURE
        }
    };
    telemetry.shutdown();
    exit
}

async fn run(args: Args, own: Vec<(&'static str, Arc<dyn Tool>)>) -> Result<(), String> {
    let worker_id = args.worker_id.clone().unwrap_or_else(default_worker_id);
    let config = WorkerConfig {
        endpoint: args.endpoint,
        source: JobSource::RabbitMq {
            url: match &args.amqp_url_file {
                Some(path) => std::fs::read_to_string(path)
                    .map_err(|err| format!("cannot read {}: {err}", path.display()))?
                    .trim_end_matches(['\n', '\r'])
                    .to_owned(),
                None => args.amqp_url,
            },
            tls: ClientTls::from_files(
                args.amqp_ca_cert.as_deref(),
                args.amqp_client_cert.as_deref(),
                args.amqp_client_key.as_deref(),
            )?,
            topology: Topology::new(&args.queue_prefix)
                .ok_or("--queue-prefix must be 1 to 128 of A-Z a-z 0-9 _ - . /")?
                .with_queue_type(args.queue_type),
        },
        worker_id,
        concurrency: args.concurrency,
        shutdown_grace: args.shutdown_grace,
        park_after: args.park_after,
        token: TokenSettings {
            flag: "--token",
            env: "TASKWORKER_TOKEN",
            file_flag: "--token-file",
            file_env: "TASKWORKER_TOKEN_FILE",
        }
        .resolve(args.token.as_deref(), args.token_file.as_deref())?,
        tls: ClientTls::from_files(
            args.ca_cert.as_deref(),
            args.client_cert.as_deref(),
            args.client_key.as_deref(),
        )?,
    };
    let mut worker = register(
        Worker::new(config),
        &args.tools,
        args.command_tools.as_deref(),
    )?;
    for (name, tool) in own {
        worker = worker
            .with_tool(name, tool)
            .map_err(|err| err.to_string())?;
    }
    let shutdown = CancellationToken::new();
    tokio::spawn(crate::signals::cancel_on_signal(shutdown.clone()));
    if let Some(address) = &args.metrics_listen {
        let handle = metrics::install()?;
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|err| format!("could not listen for metrics on {address}: {err}"))?;
        tracing::info!(addr = %listener.local_addr().map_err(|err| err.to_string())?, "serving metrics on /metrics");
        let consuming = worker.consuming();
        let ready: metrics::Readiness = Arc::new(move || consuming.load(Ordering::Relaxed));
        metrics::serve(listener, handle, Some(ready), shutdown.clone());
    }
    worker.run(shutdown).await.map_err(|err| err.to_string())
}

fn default_worker_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "worker".to_owned());
    format!("{host}/{}", std::process::id())
}

/// A count of at least one (`--concurrency 0` would take no job at all).
fn at_least_one(raw: &str) -> Result<usize, String> {
    match raw.parse::<usize>() {
        Ok(0) => Err("must be at least 1: a worker with no slot takes no job".to_owned()),
        Ok(n) => Ok(n),
        Err(err) => Err(format!("{raw:?} is not a count: {err}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_needs_a_slot() {
        assert!(at_least_one("0").is_err_and(|why| why.contains("at least 1")));
        assert_eq!(at_least_one("8"), Ok(8));
        assert!(at_least_one("-1").is_err());
    }
}
