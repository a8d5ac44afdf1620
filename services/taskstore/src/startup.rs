//! `taskstore serve` and `taskstore migrate`: wire the pieces together, and
//! take them apart in order on SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use tokio_util::sync::CancellationToken;

use crate::config::{DatabaseArgs, Fault, Mode, QueueLocation, ServeArgs, StoreLocation};
use crate::dispatch::in_process::InProcessPublisher;
use crate::dispatch::rabbitmq::RabbitPublisher;
use crate::dispatch::{reaper, relay};
use crate::grpc::{TaskExecutionService, TaskStoreService};
use crate::server::Server;
use crate::store::execution::{ExecutionStore, JobPublisher, PublishError, Published};
use crate::store::memory::MemoryTaskStore;
use crate::store::postgres::{self, PgTaskStore};
use crate::store::sqlite;
use crate::store::{StoreConfig, TaskStore};
use crate::sweeper;
use taskstore_proto::jobs::Topology;
use taskworker::queue::InProcessQueue;
use taskworker::tools::{BUILTIN_TOOLS, CommandToolsFile, builtin};
use taskworker::{JobSource, Worker, WorkerConfig};

/// Why the service could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum StartupError {
    #[error("invalid configuration: {0}")]
    Config(String),
    #[error("invalid database url: {0}")]
    DatabaseUrl(sqlx::Error),
    #[error("migrations failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("could not open the store: {0}")]
    Store(crate::StoreError),
    #[error("could not listen: {0}")]
    Bind(std::io::Error),
    #[error(transparent)]
    Serve(#[from] crate::server::ServeError),
    #[error("interrupted before the service was ready")]
    Interrupted,
}

/// The stores a running service uses, and what to close on the way out.
struct Backends {
    store: Arc<dyn TaskStore>,
    execution: Arc<dyn ExecutionStore>,
    /// For the startup log: which backend, and where its data lives.
    name: &'static str,
    location: String,
    pool: Option<PgPool>,
}

async fn open_backends(
    location: StoreLocation,
    args: &DatabaseArgs,
    config: StoreConfig,
    shutdown: &CancellationToken,
) -> Result<Backends, StartupError> {
    match location {
        StoreLocation::Postgres(url) => {
            let pool = pool(&url, args)?;
            let store = Arc::new(prepare(&pool, config, shutdown).await?);
            Ok(Backends {
                store: store.clone(),
                execution: store,
                name: "postgres",
                location: redact(&url),
                pool: Some(pool),
            })
        }
        StoreLocation::Sqlite(path) => {
            let store = Arc::new(
                sqlite::open(&path, config, None)
                    .await
                    .map_err(|err| StartupError::Config(err.to_string()))?,
            );
            let location = std::path::absolute(&path)
                .unwrap_or(path)
                .display()
                .to_string();
            Ok(Backends {
                store: store.clone(),
                execution: store,
                name: "sqlite",
                location,
                pool: None,
            })
        }
        StoreLocation::Memory => {
            // The in-memory store sweeps with the service's own timer.
            let store = Arc::new(MemoryTaskStore::new(config, None).map_err(StartupError::Store)?);
            Ok(Backends {
                store: store.clone(),
                execution: store,
                name: "memory",
                location: "in memory: lost when the process exits".to_owned(),
                pool: None,
            })
        }
    }
}

/// `taskstore serve` and `taskstore dev`: the same service, with backends
/// chosen by configuration.
pub async fn serve(args: ServeArgs, mode: Mode) -> Result<(), StartupError> {
    let config = args.store_config().map_err(StartupError::Config)?;
    let limits = args.input_limits().map_err(StartupError::Config)?;
    let location = args
        .database
        .store_location(mode)
        .map_err(StartupError::Config)?;
    let queue_location = args.queue_location(mode);
    let stop = CancellationToken::new();
    tokio::spawn(taskworker::signals::cancel_on_signal(stop.clone()));

    let backends = open_backends(location, &args.database, config, &stop).await?;
    let Backends {
        store, execution, ..
    } = &backends;
    let service =
        TaskStoreService::new(store.clone(), limits).with_max_result_wait(args.max_result_wait);
    let server = Server::bind(args.listen, service)
        .await
        .map_err(StartupError::Bind)?
        .with_execution(TaskExecutionService::new(execution.clone()))
        .with_shutdown_grace(args.shutdown_grace);
    let addr = server.local_addr().map_err(StartupError::Bind)?;

    let background = CancellationToken::new();
    let mut loops = vec![reaper::spawn(
        execution.clone(),
        args.reaper_interval,
        background.clone(),
    )];
    if let Some(interval) = args.cleanup_interval.0 {
        loops.push(sweeper::spawn(store.clone(), interval, background.clone()));
    }
    let workers_stop = stop.child_token();
    let mut workers = Vec::new();
    let queue_name = match &queue_location {
        QueueLocation::RabbitMq(url) => {
            let topology = Topology::new(&args.queue_prefix).ok_or_else(|| {
                StartupError::Config(
                    "--queue-prefix must be 1 to 128 of A-Z a-z 0-9 _ - . /".into(),
                )
            })?;
            let connect = rabbit_connector(url.clone(), topology, args.fault);
            loops.push(relay::spawn(
                execution.clone(),
                connect,
                args.relay_poll_interval,
                background.clone(),
            ));
            "rabbitmq"
        }
        QueueLocation::InProcess => {
            let queue = InProcessQueue::new();
            let publisher = InProcessPublisher(queue.clone());
            let connect: relay::Connect<InProcessPublisher> = Arc::new(move || {
                let publisher = publisher.clone();
                Box::pin(async move { Ok(publisher) })
            });
            loops.push(relay::spawn(
                execution.clone(),
                connect,
                args.relay_poll_interval,
                background.clone(),
            ));
            for index in 0..args.embedded_workers {
                let worker = embedded_worker(&args, addr, queue.clone(), index)?;
                workers.push(tokio::spawn(worker.run(workers_stop.clone())));
            }
            "in-process"
        }
    };
    tracing::info!(
        %addr,
        backend = backends.name,
        data = %backends.location,
        queue = queue_name,
        embedded_workers = workers.len(),
        "listening"
    );

    // Stop in order: embedded workers first (they report through the
    // server), then the server, then the background loops.
    let server_stop = CancellationToken::new();
    let mut served = tokio::spawn(server.run(server_stop.clone()));
    let early_end = tokio::select! {
        () = stop.cancelled() => None,
        ended = &mut served => Some(ended),
    };
    stop.cancel();
    for worker in workers {
        match worker.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::error!(error = %err, "an embedded worker failed"),
            Err(err) => tracing::error!(error = %err, "an embedded worker panicked"),
        }
    }
    server_stop.cancel();
    let served = match early_end {
        Some(ended) => ended,
        None => served.await,
    };
    background.cancel();
    for task in loops {
        // Each loop stops at its next await point; a panic there is logged.
        if let Err(err) = task.await {
            tracing::error!(error = %err, "a background loop panicked");
        }
    }
    if let Some(pool) = &backends.pool {
        pool.close().await;
    }
    tracing::info!("stopped");
    match served {
        Ok(result) => result.map_err(StartupError::from),
        Err(err) => Err(StartupError::Config(format!(
            "the server task failed: {err}"
        ))),
    }
}

/// A worker inside the service, talking to it over loopback gRPC exactly as
/// a `taskworker` process would.
fn embedded_worker(
    args: &ServeArgs,
    addr: std::net::SocketAddr,
    queue: InProcessQueue,
    index: usize,
) -> Result<Worker, StartupError> {
    let host = if addr.ip().is_unspecified() {
        "127.0.0.1".to_owned()
    } else {
        addr.ip().to_string()
    };
    let config = WorkerConfig {
        endpoint: format!("http://{host}:{}", addr.port()),
        source: JobSource::InProcess(queue),
        worker_id: format!("embedded-{index}"),
        concurrency: args.worker_concurrency,
        shutdown_grace: args.shutdown_grace,
    };
    let mut worker = Worker::new(config);
    for name in args
        .worker_tools
        .iter()
        .map(|t| t.trim())
        .filter(|t| !t.is_empty() && *t != "none")
    {
        let tool = builtin(name).ok_or_else(|| {
            StartupError::Config(format!(
                "unknown built-in tool {name:?} (known: {})",
                BUILTIN_TOOLS.join(", ")
            ))
        })?;
        worker = worker
            .with_tool(name, tool)
            .map_err(|err| StartupError::Config(err.to_string()))?;
    }
    if let Some(path) = &args.command_tools {
        let tools = CommandToolsFile::load(path)
            .and_then(CommandToolsFile::into_tools)
            .map_err(StartupError::Config)?;
        for (name, tool) in tools {
            worker = worker
                .with_tool(&name, tool)
                .map_err(|err| StartupError::Config(err.to_string()))?;
        }
    }
    Ok(worker)
}

/// A database URL without its password, for logs.
fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let credentials = &url[scheme + 3..at];
            match credentials.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

pub async fn migrate(args: DatabaseArgs) -> Result<(), StartupError> {
    let url = match args
        .store_location(Mode::Serve)
        .map_err(StartupError::Config)?
    {
        StoreLocation::Postgres(url) => url,
        StoreLocation::Sqlite(path) => {
            // Opening migrates (after checking the file).
            sqlite::open(&path, StoreConfig::default(), None)
                .await
                .map_err(|err| StartupError::Config(err.to_string()))?;
            tracing::info!(path = %path.display(), "migrations applied");
            return Ok(());
        }
        StoreLocation::Memory => {
            return Err(StartupError::Config(
                "the in-memory store has nothing to migrate".into(),
            ));
        }
    };
    let pool = pool(&url, &args)?;
    postgres::migrate(&pool).await?;
    tracing::info!("migrations applied");
    pool.close().await;
    Ok(())
}

/// Connects the relay's publisher to RabbitMQ (again after a failure).
fn rabbit_connector(
    url: String,
    topology: Topology,
    fault: Option<Fault>,
) -> relay::Connect<FaultyPublisher> {
    Arc::new(move || {
        let (url, topology) = (url.clone(), topology.clone());
        Box::pin(async move {
            let publisher = RabbitPublisher::connect(&url, &topology).await?;
            Ok(FaultyPublisher { publisher, fault })
        })
    })
}

/// The RabbitMQ publisher, with the fault tests' crash point in front.
struct FaultyPublisher {
    publisher: RabbitPublisher,
    fault: Option<Fault>,
}

#[async_trait::async_trait]
impl JobPublisher for FaultyPublisher {
    async fn publish(
        &self,
        job: &taskstore_proto::jobs::JobMessage,
    ) -> Result<Published, PublishError> {
        self.crash_if_asked(std::slice::from_ref(job));
        self.publisher.publish(job).await
    }

    // The relay's path: forwarded as a batch, so RabbitMQ's pipelined
    // confirms are kept (one round trip per batch, not per job).
    async fn publish_all(
        &self,
        jobs: &[taskstore_proto::jobs::JobMessage],
    ) -> Vec<Result<Published, PublishError>> {
        self.crash_if_asked(jobs);
        self.publisher.publish_all(jobs).await
    }
}

impl FaultyPublisher {
    fn crash_if_asked(&self, jobs: &[taskstore_proto::jobs::JobMessage]) {
        if let (Some(Fault::CrashBeforePublish), Some(job)) = (self.fault, jobs.first()) {
            tracing::error!(task_id = %job.task_id, "fault injection: crashing before publishing a committed job");
            std::process::abort();
        }
    }
}

impl relay::Publisher for FaultyPublisher {
    fn is_connected(&self) -> bool {
        self.publisher.is_connected()
    }
}

fn pool(url: &str, args: &DatabaseArgs) -> Result<PgPool, StartupError> {
    let options: PgConnectOptions = url.parse().map_err(StartupError::DatabaseUrl)?;
    Ok(postgres::lazy_pool(options, args.pool_settings()))
}

/// Migrates and opens the store, waiting (with backoff) for a database that
/// is not reachable yet; gives up only on errors a retry cannot fix.
async fn prepare(
    pool: &PgPool,
    config: StoreConfig,
    shutdown: &CancellationToken,
) -> Result<PgTaskStore, StartupError> {
    let mut delay = Duration::from_millis(250);
    loop {
        let attempt = async {
            postgres::migrate(pool).await?;
            PgTaskStore::open(pool.clone(), config.clone())
                .await
                .map_err(StartupError::Store)
        };
        let error = match attempt.await {
            Ok(store) => {
                tracing::info!("database migrated and ready");
                return Ok(store);
            }
            Err(err) if is_retryable(&err) => err,
            Err(err) => return Err(err),
        };
        tracing::warn!(error = %error, retry_in_ms = delay.as_millis() as u64, "database not ready; retrying");
        tokio::select! {
            () = shutdown.cancelled() => return Err(StartupError::Interrupted),
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

fn is_retryable(err: &StartupError) -> bool {
    match err {
        StartupError::Migrate(
            sqlx::migrate::MigrateError::Execute(err)
            | sqlx::migrate::MigrateError::ExecuteMigration(err, _),
        ) => postgres::is_unavailable(err),
        StartupError::Store(crate::StoreError::Unavailable(_)) => true,
        _ => false,
    }
}
