//! The flags of `serve` and `dev` (the same flags, with different
//! defaults), and the [`ServiceSettings`] they describe.

use std::time::Duration;

use clap::Args;
use taskstore_proto::jobs::{QueueType, Topology};

use super::tenant_limits;
use super::values::{Limit, ListenAddress};
use super::{DEFAULT_AMQP_URL, DatabaseArgs, Mode};
use crate::auth::AuthMethod;
use crate::domain::{ExecutionPolicy, PollPolicy, Ttl, TtlPolicy};
use crate::durations::parse_duration;
use crate::grpc::InputLimits;
use crate::settings::{
    ChoreSettings, EmbeddedWorkers, Fault, MetricsSettings, Migrations, QueueLocation,
    QueueSettings, ServiceSettings,
};
use crate::store::{PagePolicy, Quotas, StoreConfig};

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on for gRPC: HOST:PORT, where HOST is an IP
    /// address or a name (resolved at startup; the first address that can
    /// be bound is used). Port 0 picks a free port.
    #[arg(long, env = "TASKSTORE_LISTEN", default_value = "127.0.0.1:50051")]
    pub listen: ListenAddress,
    /// How callers authenticate, comma-separated: `api-keys` (made by
    /// `taskstore keys create`), `jwt` (tokens of an OIDC issuer, see
    /// --jwt-issuer), `mtls` (client certificates, see --tls-client-ca), or
    /// `none` (anyone who reaches the port may do anything). Required by `serve`; `dev` defaults to `none` and
    /// then listens on loopback only.
    #[arg(long, env = "TASKSTORE_AUTH", value_enum, value_delimiter = ',')]
    pub auth: Vec<AuthMethod>,
    #[command(flatten)]
    pub jwt: super::jwt::JwtArgs,
    #[command(flatten)]
    pub tls: super::tls::TlsArgs,
    #[command(flatten)]
    pub database: DatabaseArgs,
    #[command(flatten)]
    pub mcp: super::McpArgs,
    #[command(flatten)]
    pub dashboard: super::DashboardArgs,
    /// Who migrates a PostgreSQL database: `apply` (the service, before it
    /// listens) or `await` (a migrations job runs `taskstore migrate`; the
    /// service waits for it, not listening, and refuses a database migrated
    /// by a different build).
    #[arg(long, env = "TASKSTORE_MIGRATIONS", value_enum, default_value_t = Migrations::Apply)]
    pub migrations: Migrations,
    /// Retention of a task that asks for none (`1h`, `30m`, or `unlimited`).
    #[arg(long, env = "TASKSTORE_DEFAULT_TTL", default_value = "1h")]
    pub default_ttl: Limit<Duration>,
    /// Longest retention granted; longer requests are shortened (`7d`, or `unlimited`).
    #[arg(long, env = "TASKSTORE_MAX_TTL", default_value = "7d")]
    pub max_ttl: Limit<Duration>,
    /// Poll interval advised to clients.
    #[arg(long, env = "TASKSTORE_POLL_INTERVAL", default_value = "1s", value_parser = parse_duration)]
    pub poll_interval: Duration,
    /// Shortest poll interval granted to a task that asks for one.
    #[arg(long, env = "TASKSTORE_MIN_POLL_INTERVAL", default_value = "100ms", value_parser = parse_duration)]
    pub min_poll_interval: Duration,
    /// ListTasks page size when the request gives none.
    #[arg(long, env = "TASKSTORE_DEFAULT_PAGE_SIZE", default_value_t = 100)]
    pub default_page_size: u32,
    /// Largest ListTasks page; larger requests get this many.
    #[arg(long, env = "TASKSTORE_MAX_PAGE_SIZE", default_value_t = 1000)]
    pub max_page_size: u32,
    /// Creates a tenant may make per second, on each replica (`unlimited`
    /// or a number); more are RESOURCE_EXHAUSTED with a retry delay.
    #[arg(
        long,
        env = "TASKSTORE_CREATES_PER_SECOND",
        default_value = "unlimited"
    )]
    pub creates_per_second: Limit<f64>,
    /// Creates a tenant may make at once above that rate (default: one
    /// second's worth).
    #[arg(long, env = "TASKSTORE_CREATE_BURST")]
    pub create_burst: Option<u32>,
    /// WatchTask streams and waiting GetTaskResult calls a tenant may hold
    /// open on each replica (`unlimited` or a number).
    #[arg(long, env = "TASKSTORE_MAX_WAITING_CALLS", default_value = "unlimited")]
    pub max_waiting_calls: Limit<u64>,
    /// A JSON file of per-tenant limits that differ from the defaults
    /// above: {"tenants": {"acme": {"max_tasks": 100000, "creates_per_second": 200}}}.
    #[arg(long, env = "TASKSTORE_TENANT_LIMITS", value_name = "PATH")]
    pub tenant_limits: Option<std::path::PathBuf>,
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
    /// How long after a task's creation a create with the same idempotency
    /// key returns it instead of creating another (never beyond the task's
    /// own life).
    #[arg(long, env = "TASKSTORE_IDEMPOTENCY_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub idempotency_retention: Duration,
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
    /// in-process queue with embedded workers. For a cluster, one URL per
    /// node, comma-separated: the relay connects to one and moves to the
    /// next when it goes away.
    ///
    /// Default for `serve`: amqp://guest:guest@127.0.0.1:5672/%2f; for `dev`:
    /// none.
    #[arg(long, env = "TASKSTORE_AMQP_URL", hide_env_values = true)]
    pub amqp_url: Option<String>,
    /// A file holding the RabbitMQ URL (with its password), instead of
    /// --amqp-url.
    #[arg(
        long,
        env = "TASKSTORE_AMQP_URL_FILE",
        value_name = "PATH",
        value_parser = super::values::read_secret_file,
        conflicts_with = "amqp_url"
    )]
    pub amqp_url_file: Option<super::values::SecretFile>,
    #[command(flatten)]
    pub amqp_tls: super::tls::BrokerTlsArgs,
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
    /// How long an embedded worker's tool waits for an answer to its
    /// question before the attempt gives the task back (taskworker's
    /// --park-after).
    #[arg(long, env = "TASKSTORE_WORKER_PARK_AFTER", default_value = "1m", value_parser = crate::durations::parse_duration)]
    pub worker_park_after: Duration,
    /// Prefix of the RabbitMQ exchange and queue names; the service and its
    /// workers must use the same one.
    #[arg(long, env = "TASKSTORE_QUEUE_PREFIX", default_value = "taskstore")]
    pub queue_prefix: String,
    /// The kind of queue the workers declare for each tool (quorum or
    /// classic); told to workers that learn it from Heartbeat (the Python
    /// and TypeScript workers), and it must match `taskworker
    /// --queue-type`.
    #[arg(long, env = "TASKSTORE_QUEUE_TYPE", default_value = "quorum", value_parser = QueueType::parse)]
    pub queue_type: QueueType,
    /// How long a worker's claim lasts without renewal; a crashed worker's
    /// task is dispatched again within this plus --reaper-interval.
    #[arg(long, env = "TASKSTORE_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,
    /// How long a published job may go unclaimed before it is published
    /// again, in case the broker lost it (doubling with each publish, at
    /// most 10 minutes); a second copy is fenced at claim.
    #[arg(long, env = "TASKSTORE_REPUBLISH_AFTER", default_value = "60s", value_parser = parse_duration)]
    pub republish_after: Duration,
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
    /// Serve Prometheus metrics on GET /metrics at this address
    /// (HOST:PORT, e.g. 0.0.0.0:9090); off unless set.
    #[arg(long, env = "TASKSTORE_METRICS_LISTEN")]
    pub metrics_listen: Option<ListenAddress>,
    /// How often the gauges of tasks by status and of the outbox are
    /// refreshed (a count over the live tasks).
    #[arg(long, env = "TASKSTORE_METRICS_SNAPSHOT_INTERVAL", default_value = "30s", value_parser = parse_duration)]
    pub metrics_snapshot_interval: Duration,
    /// How long in-flight RPCs may take to finish on SIGTERM/SIGINT.
    #[arg(long, env = "TASKSTORE_SHUTDOWN_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,
}

impl ServeArgs {
    /// The service these flags describe, resolved and validated once; the
    /// startup sees only this.
    pub fn settings(&self, mode: Mode) -> Result<ServiceSettings, String> {
        let topology = Topology::new(&self.queue_prefix)
            .ok_or("--queue-prefix must be 1 to 128 of A-Z a-z 0-9 _ - . /")?
            .with_queue_type(self.queue_type);
        Ok(ServiceSettings {
            auth: self.auth_methods(mode)?,
            jwt: self.jwt.settings()?,
            tls: self.tls_settings(mode)?,
            listen: self.listen.to_string(),
            store: self.database.store_location(mode)?,
            migrations: self.migrations,
            pool: self.database.pool_settings(),
            config: self.store_config()?,
            limits: self.input_limits()?,
            admission: self.tenant_limits()?.admission,
            queue: Some(QueueSettings {
                location: self.queue_location(mode),
                broker_tls: self.amqp_tls.settings()?,
                topology,
                poll_interval: self.relay_poll_interval,
                fault: self.fault,
            }),
            chores: Some(ChoreSettings {
                reaper_interval: self.reaper_interval,
                cleanup_interval: self.cleanup_interval.0,
            }),
            embedded: EmbeddedWorkers {
                count: match self.queue_location(mode) {
                    QueueLocation::InProcess => self.embedded_workers,
                    QueueLocation::RabbitMq(_) => 0,
                },
                concurrency: self.worker_concurrency,
                tools: self.worker_tools.clone(),
                command_tools: self.command_tools.clone(),
                park_after: self.worker_park_after,
                // `dev` gives running tasks back at once, so that Ctrl-C
                // stops it within moments; `serve` lets them finish.
                shutdown_grace: match mode {
                    Mode::Dev => Duration::ZERO,
                    Mode::Serve | Mode::Mcp => self.shutdown_grace,
                },
            },
            max_result_wait: self.max_result_wait,
            shutdown_grace: self.shutdown_grace,
            mcp: self.mcp.settings(
                mode,
                self.max_message_bytes,
                self.max_result_wait,
                &self.auth_methods(mode)?,
            )?,
            dashboard: self.dashboard.settings(
                mode,
                self.auth_methods(mode)? != [AuthMethod::None],
                self.auth_methods(mode)?.contains(&AuthMethod::Jwt),
            )?,
            metrics: self.metrics_listen.clone().map(|listen| MetricsSettings {
                listen: listen.to_string(),
                snapshot_interval: self.metrics_snapshot_interval,
            }),
        })
    }

    /// The authentication methods, checked: `serve` must be told (`none`
    /// included, explicitly); `none` cannot be combined with a method; and
    /// `dev` without authentication listens on loopback only.
    pub fn auth_methods(&self, mode: Mode) -> Result<Vec<AuthMethod>, String> {
        let methods = match (mode, self.auth.is_empty()) {
            (Mode::Serve | Mode::Mcp, true) => {
                return Err("serve and mcp need --auth (TASKSTORE_AUTH), one or more of: api-keys (keys made with `taskstore keys create`), jwt (tokens of an OIDC issuer: --jwt-issuer, --jwt-audience, --jwt-jwks-url), mtls (client certificates: --tls-client-ca), or none to turn authentication off (anyone who reaches the port may then read and change every task)".to_owned());
            }
            (Mode::Dev, true) => vec![AuthMethod::None],
            (_, false) => self.auth.clone(),
        };
        if methods.contains(&AuthMethod::None) && methods.len() > 1 {
            return Err("--auth none cannot be combined with other methods".to_owned());
        }
        if mode == Mode::Dev && methods == [AuthMethod::None] && !self.listen.is_loopback() {
            return Err(format!(
                "dev runs without authentication, so it listens on loopback only, not {}: use 127.0.0.1 or localhost, or `taskstore serve --auth api-keys` to listen on the network",
                self.listen
            ));
        }
        Ok(methods)
    }

    /// The port's TLS; embedded workers speak plaintext to their own
    /// process, so TLS is for a service whose workers are elsewhere.
    fn tls_settings(&self, mode: Mode) -> Result<Option<crate::settings::ServerTls>, String> {
        let tls = self.tls.settings(&self.auth_methods(mode)?)?;
        let embedded = matches!(self.queue_location(mode), QueueLocation::InProcess)
            && self.embedded_workers > 0;
        if tls.is_some() && embedded {
            return Err("--tls-cert with embedded workers is not supported: run taskworker processes (--amqp-url), or --embedded-workers 0".to_owned());
        }
        Ok(tls)
    }

    pub fn queue_location(&self, mode: Mode) -> QueueLocation {
        let given = (self.amqp_url.as_deref()).or(self
            .amqp_url_file
            .as_ref()
            .map(super::values::SecretFile::expose));
        match (given, mode) {
            (Some("none"), _) | (None, Mode::Dev) => QueueLocation::InProcess,
            (Some(url), _) => QueueLocation::RabbitMq(url.to_owned()),
            (None, Mode::Serve | Mode::Mcp) => QueueLocation::RabbitMq(DEFAULT_AMQP_URL.to_owned()),
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
            poll: PollPolicy {
                default: self.poll_interval,
                min: self.min_poll_interval,
            },
            paging: PagePolicy {
                default_size: self.default_page_size,
                max_size: self.max_page_size,
            },
            quotas: self.default_quotas(),
            tenant_quotas: self.tenant_limits()?.quotas,
            tenant_concurrency: self.tenant_limits()?.concurrency,
            cleanup_batch_size: self.cleanup_batch_size,
            idempotency_retention: self.idempotency_retention,
            execution: ExecutionPolicy {
                lease_duration: self.lease_duration,
                default_max_attempts: self.default_max_attempts,
                backoff_base: self.retry_backoff_base,
                backoff_max: self.retry_backoff_max,
                republish_after: self.republish_after,
                ..ExecutionPolicy::default()
            },
        };
        config.validate().map_err(|err| err.to_string())?;
        Ok(config)
    }

    fn default_quotas(&self) -> Quotas {
        Quotas {
            dispatch_weight: None,
            max_priority: None,
            max_tasks: self.max_tasks.0,
            max_tasks_per_session: self.max_tasks_per_session.0,
        }
    }

    /// Every tenant's quotas and admission limits: the flags' defaults,
    /// and the tenants of `--tenant-limits`.
    pub fn tenant_limits(&self) -> Result<tenant_limits::TenantLimits, String> {
        let file =
            match &self.tenant_limits {
                Some(path) => Some(std::fs::read_to_string(path).map_err(|err| {
                    format!("cannot read --tenant-limits {}: {err}", path.display())
                })?),
                None => None,
            };
        let max_waiting_calls = match self.max_waiting_calls.0 {
            Some(n) => Some(u32::try_from(n).map_err(|_| "--max-waiting-calls is too large")?),
            None => None,
        };
        tenant_limits::resolve(
            tenant_limits::Defaults {
                quotas: self.default_quotas(),
                creates_per_second: self.creates_per_second.0,
                create_burst: self.create_burst,
                max_waiting_calls,
            },
            file.as_deref(),
        )
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
