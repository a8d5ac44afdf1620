//! `taskstore serve` and `taskstore migrate`: wire the pieces together, and
//! take them apart in order on SIGTERM/SIGINT.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use tokio_util::sync::CancellationToken;

use crate::config::{DatabaseArgs, Fault, ServeArgs};
use crate::dispatch::rabbitmq::RabbitPublisher;
use crate::dispatch::{reaper, relay};
use crate::grpc::{TaskExecutionService, TaskStoreService};
use crate::server::Server;
use crate::store::execution::{ExecutionStore, JobPublisher, PublishError, Published};
use crate::store::postgres::{self, PgTaskStore};
use crate::store::{StoreConfig, TaskStore};
use crate::sweeper;
use taskstore_proto::jobs::Topology;

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

pub async fn serve(args: ServeArgs) -> Result<(), StartupError> {
    let config = args.store_config().map_err(StartupError::Config)?;
    let limits = args.input_limits().map_err(StartupError::Config)?;
    let shutdown = CancellationToken::new();
    tokio::spawn(cancel_on_signal(shutdown.clone()));

    let pool = pool(&args.database)?;
    let pg_store = Arc::new(prepare(&pool, config, &shutdown).await?);
    let store: Arc<dyn TaskStore> = pg_store.clone();
    let execution: Arc<dyn ExecutionStore> = pg_store;

    let service =
        TaskStoreService::new(store.clone(), limits).with_max_result_wait(args.max_result_wait);
    let server = Server::bind(args.listen, service)
        .await
        .map_err(StartupError::Bind)?
        .with_execution(TaskExecutionService::new(execution.clone()))
        .with_shutdown_grace(args.shutdown_grace);
    let addr = server.local_addr().map_err(StartupError::Bind)?;
    tracing::info!(%addr, backend = "postgres", queue = "rabbitmq", "listening");

    let topology = Topology::new(&args.queue_prefix).ok_or_else(|| {
        StartupError::Config("--queue-prefix must be 1 to 128 of A-Z a-z 0-9 _ - . /".into())
    })?;
    let mut background = vec![
        reaper::spawn(
            execution.clone(),
            args.reaper_interval,
            shutdown.child_token(),
        ),
        relay::spawn(
            execution,
            rabbit_connector(args.amqp_url.clone(), topology, args.fault),
            args.relay_poll_interval,
            shutdown.child_token(),
        ),
    ];
    if let Some(interval) = args.cleanup_interval.0 {
        background.push(sweeper::spawn(
            store.clone(),
            interval,
            shutdown.child_token(),
        ));
    }
    let served = server.run(shutdown.clone()).await;

    shutdown.cancel();
    for task in background {
        // Each loop stops at its next await point; a panic there is logged.
        if let Err(err) = task.await {
            tracing::error!(error = %err, "a background loop panicked");
        }
    }
    pool.close().await;
    tracing::info!("stopped");
    served.map_err(StartupError::from)
}

pub async fn migrate(args: DatabaseArgs) -> Result<(), StartupError> {
    let pool = pool(&args)?;
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
        if self.fault == Some(Fault::CrashBeforePublish) {
            tracing::error!(task_id = %job.task_id, "fault injection: crashing before publishing a committed job");
            std::process::abort();
        }
        self.publisher.publish(job).await
    }
}

impl relay::Publisher for FaultyPublisher {
    fn is_connected(&self) -> bool {
        self.publisher.is_connected()
    }
}

fn pool(args: &DatabaseArgs) -> Result<PgPool, StartupError> {
    let options: PgConnectOptions = args
        .database_url
        .parse()
        .map_err(StartupError::DatabaseUrl)?;
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

/// Cancels `shutdown` on SIGTERM or SIGINT.
pub async fn cancel_on_signal(shutdown: CancellationToken) {
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(err) => {
                tracing::error!(error = %err, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    let interrupt = async {
        if let Err(err) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %err, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    let signal = tokio::select! {
        () = terminate => "SIGTERM",
        () = interrupt => "SIGINT",
    };
    tracing::info!(signal, "shutdown requested");
    shutdown.cancel();
}
