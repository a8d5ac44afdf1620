//! Command-line flags, each with a `TASKSTORE_*` environment equivalent, and
//! their translation into the library's configuration types.

use std::net::SocketAddr;
use std::str::FromStr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::cli::ClientCommand;
use crate::domain::{ExecutionPolicy, Ttl, TtlPolicy};
use crate::grpc::InputLimits;
use crate::store::postgres::PoolSettings;
use crate::store::{PagePolicy, Quotas, StoreConfig};
use crate::telemetry::LogFormat;

#[derive(Debug, Parser)]
#[command(
    name = "taskstore",
    version,
    about = "A durable task store for MCP servers, served over gRPC."
)]
pub struct Cli {
    /// Log line format.
    #[arg(
        long,
        env = "TASKSTORE_LOG_FORMAT",
        value_enum,
        default_value = "text",
        global = true
    )]
    pub log_format: LogFormat,
    /// Log filter, in RUST_LOG syntax (e.g. `info`, `taskstore=debug,sqlx=warn`).
    #[arg(long, env = "TASKSTORE_LOG", default_value = "info", global = true)]
    pub log_level: String,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gRPC service (migrates the database first).
    Serve(Box<ServeArgs>),
    /// Run everything in one process, with nothing to install: the service,
    /// an in-process job queue and embedded workers (defaults: a SQLite file
    /// taskstore-dev.db, no broker, two workers).
    Dev(Box<ServeArgs>),
    /// Drive a running service with load and report throughput and latency.
    Bench(crate::bench::BenchArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    #[command(flatten)]
    Client(ClientCommand),
}

/// Where the database is and how to reach it.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Where tasks are stored: `postgres://…`, `sqlite://path` (one file) or
    /// `memory:` (lost on exit). Default: postgres://postgres@127.0.0.1:5432/
    /// postgres for `serve` and `migrate`, sqlite://taskstore-dev.db for `dev`.
    #[arg(long, env = "TASKSTORE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Most connections in the pool.
    #[arg(long, env = "TASKSTORE_DB_MAX_CONNECTIONS", default_value_t = 10)]
    pub db_max_connections: u32,
    /// How long an RPC waits for a database connection before it fails with
    /// UNAVAILABLE (e.g. `5s`).
    #[arg(long, env = "TASKSTORE_DB_ACQUIRE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub db_acquire_timeout: Duration,
}

/// The default PostgreSQL URL of `serve` and `migrate`.
pub const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
/// The default RabbitMQ URL of `serve`.
pub const DEFAULT_AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

/// Which command a [`ServeArgs`] came from: they differ only in defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Serve,
    Dev,
}

/// Where tasks are stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    Postgres(String),
    Sqlite(std::path::PathBuf),
    Memory,
}

/// The default store of `dev`: a SQLite file in the working directory.
pub const DEFAULT_DEV_DATABASE_URL: &str = "sqlite://taskstore-dev.db";

/// Where jobs go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueLocation {
    RabbitMq(String),
    /// The in-process queue, consumed by embedded workers.
    InProcess,
}

impl DatabaseArgs {
    pub fn store_location(&self, mode: Mode) -> Result<StoreLocation, String> {
        let url = match (&self.database_url, mode) {
            (Some(url), _) => url.as_str(),
            (None, Mode::Serve) => DEFAULT_POSTGRES_URL,
            (None, Mode::Dev) => DEFAULT_DEV_DATABASE_URL,
        };
        if url == "memory:" {
            Ok(StoreLocation::Memory)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreLocation::Postgres(url.to_owned()))
        } else if let Some(path) = crate::store::sqlite::path_of(url) {
            Ok(StoreLocation::Sqlite(path))
        } else {
            Err(format!(
                "unsupported --database-url {url:?}: use postgres://…, sqlite://path or memory:"
            ))
        }
    }

    pub fn pool_settings(&self) -> PoolSettings {
        PoolSettings {
            max_connections: self.db_max_connections,
            acquire_timeout: self.db_acquire_timeout,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on for gRPC.
    #[arg(long, env = "TASKSTORE_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: SocketAddr,
    #[command(flatten)]
    pub database: DatabaseArgs,
    /// Retention of a task that asks for none (`1h`, `30m`, or `unlimited`).
    #[arg(long, env = "TASKSTORE_DEFAULT_TTL", default_value = "1h")]
    pub default_ttl: Limit<Duration>,
    /// Longest retention granted; longer requests are shortened (`7d`, or `unlimited`).
    #[arg(long, env = "TASKSTORE_MAX_TTL", default_value = "7d")]
    pub max_ttl: Limit<Duration>,
    /// Poll interval advised to clients.
    #[arg(long, env = "TASKSTORE_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// ListTasks page size when the request gives none.
    #[arg(long, env = "TASKSTORE_DEFAULT_PAGE_SIZE", default_value_t = 100)]
    pub default_page_size: u32,
    /// Largest ListTasks page; larger requests get this many.
    #[arg(long, env = "TASKSTORE_MAX_PAGE_SIZE", default_value_t = 1000)]
    pub max_page_size: u32,
    /// Most unexpired tasks per tenant (`unlimited` or a number).
    #[arg(long, env = "TASKSTORE_MAX_TASKS", default_value = "unlimited")]
    pub max_tasks: Limit<u64>,
    /// Most unexpired tasks per session (`unlimited` or a number).
    #[arg(
        long,
        env = "TASKSTORE_MAX_TASKS_PER_SESSION",
        default_value = "unlimited"
    )]
    pub max_tasks_per_session: Limit<u64>,
    /// How often expired tasks are deleted (`1m`, or `off`).
    #[arg(long, env = "TASKSTORE_CLEANUP_INTERVAL", default_value = "1m")]
    pub cleanup_interval: Limit<Duration>,
    /// Most expired tasks deleted per statement.
    #[arg(long, env = "TASKSTORE_CLEANUP_BATCH_SIZE", default_value_t = 1000)]
    pub cleanup_batch_size: u32,
    /// Largest request_json / result_json, in bytes.
    #[arg(long, env = "TASKSTORE_MAX_JSON_BYTES", default_value_t = 1024 * 1024)]
    pub max_json_bytes: usize,
    /// Largest status message, in bytes.
    #[arg(
        long,
        env = "TASKSTORE_MAX_STATUS_MESSAGE_BYTES",
        default_value_t = 4096
    )]
    pub max_status_message_bytes: usize,
    /// Largest session id, in bytes.
    #[arg(long, env = "TASKSTORE_MAX_SESSION_ID_BYTES", default_value_t = 256)]
    pub max_session_id_bytes: usize,
    /// Largest gRPC message, in bytes.
    #[arg(long, env = "TASKSTORE_MAX_MESSAGE_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub max_message_bytes: usize,
    /// RabbitMQ URL that dispatched jobs are published to, or `none` for the
    /// in-process queue with embedded workers. Default: amqp://guest:guest@
    /// 127.0.0.1:5672/%2f for `serve`, none for `dev`.
    #[arg(long, env = "TASKSTORE_AMQP_URL")]
    pub amqp_url: Option<String>,
    /// Workers run inside the service when the queue is in-process.
    #[arg(long, env = "TASKSTORE_EMBEDDED_WORKERS", default_value_t = 2)]
    pub embedded_workers: usize,
    /// Attempts each embedded worker runs at once.
    #[arg(long, env = "TASKSTORE_WORKER_CONCURRENCY", default_value_t = 4)]
    pub worker_concurrency: usize,
    /// Built-in tools the embedded workers serve (echo, sleep, fail, hash, noop), or `none`.
    #[arg(
        long,
        env = "TASKSTORE_WORKER_TOOLS",
        default_value = "echo,sleep,fail,hash,noop",
        value_delimiter = ','
    )]
    pub worker_tools: Vec<String>,
    /// A JSON file of command tools for the embedded workers (as taskworker's --command-tools).
    #[arg(long, env = "TASKSTORE_COMMAND_TOOLS")]
    pub command_tools: Option<std::path::PathBuf>,
    /// Prefix of the RabbitMQ exchange and queue names; the service and its
    /// workers must use the same one.
    #[arg(long, env = "TASKSTORE_QUEUE_PREFIX", default_value = "taskstore")]
    pub queue_prefix: String,
    /// How long a worker's claim lasts without renewal; a crashed worker's
    /// task is dispatched again within this plus --reaper-interval.
    #[arg(long, env = "TASKSTORE_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How often expired leases are looked for.
    #[arg(long, env = "TASKSTORE_REAPER_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub reaper_interval: Duration,
    /// Attempts of a dispatched task that asks for no number.
    #[arg(long, env = "TASKSTORE_DEFAULT_MAX_ATTEMPTS", default_value_t = 3)]
    pub default_max_attempts: u32,
    /// First retry delay after a retryable error; doubles per attempt.
    #[arg(long, env = "TASKSTORE_RETRY_BACKOFF_BASE", default_value = "1s", value_parser = parse_duration)]
    pub retry_backoff_base: Duration,
    /// Longest retry delay.
    #[arg(long, env = "TASKSTORE_RETRY_BACKOFF_MAX", default_value = "60s", value_parser = parse_duration)]
    pub retry_backoff_max: Duration,
    /// How often the outbox relay looks for due jobs without being woken.
    #[arg(long, env = "TASKSTORE_RELAY_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub relay_poll_interval: Duration,
    /// Longest a waiting GetTaskResult blocks.
    #[arg(long, env = "TASKSTORE_MAX_RESULT_WAIT", default_value = "10m", value_parser = parse_duration)]
    pub max_result_wait: Duration,
    /// Test-only fault injection; never set it in production.
    #[arg(long, env = "TASKSTORE_FAULT", value_enum, hide = true)]
    pub fault: Option<Fault>,
    /// How long in-flight RPCs may take to finish on SIGTERM/SIGINT.
    #[arg(long, env = "TASKSTORE_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
}

impl ServeArgs {
    pub fn queue_location(&self, mode: Mode) -> QueueLocation {
        match (self.amqp_url.as_deref(), mode) {
            (Some("none"), _) | (None, Mode::Dev) => QueueLocation::InProcess,
            (Some(url), _) => QueueLocation::RabbitMq(url.to_owned()),
            (None, Mode::Serve) => QueueLocation::RabbitMq(DEFAULT_AMQP_URL.to_owned()),
        }
    }

    /// The store configuration these flags describe, validated.
    pub fn store_config(&self) -> Result<StoreConfig, String> {
        let ttl = |limit: Limit<Duration>| {
            limit
                .0
                .map(Ttl::from_duration)
                .transpose()
                .map_err(|err| format!("ttl {err}"))
        };
        let config = StoreConfig {
            ttl: TtlPolicy {
                default: ttl(self.default_ttl)?,
                max: ttl(self.max_ttl)?,
            },
            poll_interval: self.poll_interval,
            paging: PagePolicy {
                default_size: self.default_page_size,
                max_size: self.max_page_size,
            },
            quotas: Quotas {
                max_tasks: self.max_tasks.0,
                max_tasks_per_session: self.max_tasks_per_session.0,
            },
            cleanup_batch_size: self.cleanup_batch_size,
            execution: ExecutionPolicy {
                lease_duration: self.lease_duration,
                default_max_attempts: self.default_max_attempts,
                backoff_base: self.retry_backoff_base,
                backoff_max: self.retry_backoff_max,
                ..ExecutionPolicy::default()
            },
        };
        config.validate().map_err(|err| err.to_string())?;
        Ok(config)
    }

    pub fn input_limits(&self) -> Result<InputLimits, String> {
        let limits = InputLimits {
            max_json_bytes: self.max_json_bytes,
            max_status_message_bytes: self.max_status_message_bytes,
            max_session_id_bytes: self.max_session_id_bytes,
            max_message_bytes: self.max_message_bytes,
        };
        limits.validate()?;
        Ok(limits)
    }
}

/// Faults the fault tests inject into a real service process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Fault {
    /// Abort the process when the relay is about to publish a job: the task
    /// is committed, its job is not yet in the queue.
    CrashBeforePublish,
}

/// A value or no limit (`unlimited`, `none` or `off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit<T>(pub Option<T>);

impl FromStr for Limit<Duration> {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if is_unlimited(raw) {
            Ok(Limit(None))
        } else {
            parse_duration(raw).map(|d| Limit(Some(d)))
        }
    }
}

impl FromStr for Limit<u64> {
    type Err = String;
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if is_unlimited(raw) {
            Ok(Limit(None))
        } else {
            raw.parse()
                .map(|n| Limit(Some(n)))
                .map_err(|err| format!("{raw:?}: {err}"))
        }
    }
}

fn is_unlimited(raw: &str) -> bool {
    matches!(raw, "unlimited" | "none" | "off")
}

/// `30s`, `5m`, `1h 30m`, `7d`, `250ms`.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    humantime::parse_duration(raw).map_err(|err| format!("{raw:?}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_parse() {
        assert_eq!("unlimited".parse::<Limit<u64>>(), Ok(Limit(None)));
        assert_eq!("10".parse::<Limit<u64>>(), Ok(Limit(Some(10))));
        assert!("ten".parse::<Limit<u64>>().is_err());
        assert_eq!("off".parse::<Limit<Duration>>(), Ok(Limit(None)));
        assert_eq!(
            "90s".parse::<Limit<Duration>>(),
            Ok(Limit(Some(Duration::from_secs(90))))
        );
    }

    #[test]
    fn default_flags_make_a_valid_configuration() {
        let cli = Cli::try_parse_from(["taskstore", "serve"]).expect("defaults parse");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected")
        };
        let config = args.store_config().expect("valid defaults");
        assert_eq!(config.ttl.default.map(Ttl::as_millis), Some(3_600_000));
        assert!(args.input_limits().is_ok());
    }

    #[test]
    fn serve_and_dev_differ_only_in_defaults() {
        let parse = |args: &[&str]| match Cli::try_parse_from(args).expect("flags parse").command {
            Command::Serve(args) => (Mode::Serve, args),
            Command::Dev(args) => (Mode::Dev, args),
            other => panic!("unexpected {other:?}"),
        };
        let (mode, serve) = parse(&["taskstore", "serve"]);
        assert_eq!(
            serve.database.store_location(mode),
            Ok(StoreLocation::Postgres(DEFAULT_POSTGRES_URL.into()))
        );
        assert_eq!(
            serve.queue_location(mode),
            QueueLocation::RabbitMq(DEFAULT_AMQP_URL.into())
        );
        let (mode, dev) = parse(&["taskstore", "dev"]);
        assert_eq!(
            dev.database.store_location(mode),
            Ok(StoreLocation::Sqlite("taskstore-dev.db".into()))
        );
        assert_eq!(dev.queue_location(mode), QueueLocation::InProcess);
        let (mode, mixed) = parse(&[
            "taskstore",
            "serve",
            "--database-url",
            "memory:",
            "--amqp-url",
            "none",
        ]);
        assert_eq!(
            mixed.database.store_location(mode),
            Ok(StoreLocation::Memory)
        );
        assert_eq!(mixed.queue_location(mode), QueueLocation::InProcess);
        let (mode, file) = parse(&["taskstore", "serve", "--database-url", "sqlite:///tmp/t.db"]);
        assert_eq!(
            file.database.store_location(mode),
            Ok(StoreLocation::Sqlite("/tmp/t.db".into()))
        );
        let (mode, bad) = parse(&["taskstore", "serve", "--database-url", "mysql://x"]);
        assert!(bad.database.store_location(mode).is_err());
    }

    #[test]
    fn contradictory_flags_are_refused() {
        let cli = Cli::try_parse_from([
            "taskstore",
            "serve",
            "--default-ttl",
            "2d",
            "--max-ttl",
            "1d",
        ])
        .expect("flags parse");
        let Command::Serve(args) = cli.command else {
            panic!("serve expected")
        };
        assert!(args.store_config().is_err());
    }
}
