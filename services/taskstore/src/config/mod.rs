//! Command-line flags, each with a `TASKSTORE_*` environment equivalent, and
//! their translation into the library's configuration types
//! ([`crate::settings`]), once, here at the edge.

mod client;
mod dashboard;
mod jwt;
mod keys;
mod mcp;
mod serve;
mod tenant_limits;
mod tls;
mod values;

use std::time::Duration;

use clap::{Args, Parser, Subcommand};

pub use self::client::{ClientArgs, ClientCommand, CreateArgs, EXIT_STATUSES};
pub use self::dashboard::{DEFAULT_DASHBOARD_LISTEN, DashboardArgs};
pub use self::keys::{KeysAction, KeysArgs};
pub use self::mcp::{DEFAULT_MCP_LISTEN, McpArgs, McpListen};
pub use self::serve::ServeArgs;
pub use self::values::{Limit, ListenAddress};

use crate::durations::parse_duration;
use crate::settings::StoreLocation;
use crate::store::postgres::PoolSettings;
use taskstore_telemetry::LogFormat;

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
    /// Run the gRPC service (migrates the database first, unless told
    /// `--migrations await`).
    Serve(Box<ServeArgs>),
    /// Run everything in one process, with nothing to install: the service,
    /// an in-process job queue and embedded workers (defaults: a SQLite file
    /// taskstore-dev.db, no broker, two workers), and MCP on
    /// http://127.0.0.1:50052/mcp.
    Dev(Box<ServeArgs>),
    /// Run a replica of the service that also serves MCP (Streamable HTTP
    /// on --mcp-listen, default 127.0.0.1:50052/mcp): the fleet's tools as
    /// durable MCP tasks. The same flags as `serve`.
    Mcp(Box<ServeArgs>),
    /// Drive a running service with load and report throughput and latency.
    Bench(crate::bench::BenchArgs),
    /// Apply pending database migrations and exit.
    Migrate(DatabaseArgs),
    /// Make, list and revoke API keys (in the database of --database-url).
    Keys(KeysArgs),
    /// Print a shell completion script: `taskstore completions bash >
    /// /etc/bash_completion.d/taskstore` (or zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    #[command(flatten)]
    Client(ClientCommand),
}

/// Where the database is and how to reach it. Global: `taskstore keys
/// create --database-url …` works as `taskstore keys --database-url … create`.
#[derive(Debug, Clone, Args)]
pub struct DatabaseArgs {
    /// Where tasks are stored: `postgres://…`, `sqlite://path` (one file) or
    /// `memory:` (lost on exit).
    ///
    /// Default for `serve` and `migrate`:
    /// postgres://postgres@127.0.0.1:5432/postgres; for `dev`:
    /// sqlite://taskstore-dev.db.
    #[arg(
        long,
        env = "TASKSTORE_DATABASE_URL",
        hide_env_values = true,
        global = true
    )]
    pub database_url: Option<String>,
    /// A file holding the database URL (with its password), instead of
    /// --database-url: e.g. a mounted Kubernetes Secret.
    #[arg(
        long,
        global = true,
        env = "TASKSTORE_DATABASE_URL_FILE",
        value_name = "PATH",
        value_parser = values::read_secret_file,
        conflicts_with = "database_url"
    )]
    pub database_url_file: Option<values::SecretFile>,
    /// Most connections in the pool.
    #[arg(
        long,
        env = "TASKSTORE_DB_MAX_CONNECTIONS",
        default_value_t = 10,
        global = true
    )]
    pub db_max_connections: u32,
    /// How long an RPC waits for a database connection before it fails with
    /// UNAVAILABLE (e.g. `5s`).
    #[arg(long, env = "TASKSTORE_DB_ACQUIRE_TIMEOUT", default_value = "5s", value_parser = parse_duration, global = true)]
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
    /// `serve` with the MCP endpoint on: a gateway replica.
    Mcp,
}

/// The default store of `dev`: a SQLite file in the working directory.
pub const DEFAULT_DEV_DATABASE_URL: &str = "sqlite://taskstore-dev.db";

impl DatabaseArgs {
    pub fn store_location(&self, mode: Mode) -> Result<StoreLocation, String> {
        let given = (self.database_url.as_deref()).or(self
            .database_url_file
            .as_ref()
            .map(values::SecretFile::expose));
        let url = match (given, mode) {
            (Some(url), _) => url,
            (None, Mode::Serve | Mode::Mcp) => DEFAULT_POSTGRES_URL,
            (None, Mode::Dev) => DEFAULT_DEV_DATABASE_URL,
        };
        if url == "memory:" {
            Ok(StoreLocation::Memory)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StoreLocation::Postgres(url.to_owned()))
        } else if let Some(path) = crate::store::sqlite::path_of(url) {
            Ok(StoreLocation::Sqlite(path))
        } else {
            // Not the URL itself: it may hold a password.
            let scheme = url
                .split("://")
                .next()
                .filter(|s| s.len() < url.len())
                .unwrap_or("no scheme");
            Err(format!(
                "unsupported --database-url (scheme {scheme:?}): use postgres://…, sqlite://path or memory:"
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::Ttl;
    use crate::settings::QueueLocation;

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
