//! The stores a service runs on, opened from their location: PostgreSQL
//! (migrated first, waiting for a database that is not up yet), a SQLite
//! file, or memory. Tests that hold a store already wrap it with
//! [`Backends::from_store`].

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;
use tokio_util::sync::CancellationToken;

use super::StartupError;
use crate::settings::{Migrations, StoreLocation};
use crate::store::execution::{DispatchStore, ExecutionStore};
use crate::store::keys::{KeyStore, MemoryKeys, PgKeys};
use crate::store::memory::MemoryTaskStore;
use crate::store::operations::OperationsStore;
use crate::store::postgres::{self, PgTaskStore, PoolSettings};
use crate::store::sqlite;
use crate::store::{InsightsSource, StoreConfig, TaskInsights, TaskStore};

/// One store seen through each of the service's traits.
#[derive(Clone)]
pub struct Backends {
    pub store: Arc<dyn TaskStore>,
    pub execution: Arc<dyn ExecutionStore>,
    pub dispatch: Arc<dyn DispatchStore>,
    pub operations: Arc<dyn OperationsStore>,
    /// The dashboard's reads (bounded; PostgreSQL's on a pool of their own).
    pub insights: Arc<dyn TaskInsights>,
    /// Where API keys are kept: the same database (memory: the process).
    pub keys: Arc<dyn KeyStore>,
    /// For the startup log and `status`: which backend, where its data is.
    pub name: &'static str,
    pub location: String,
    /// Closed on the way out (PostgreSQL: the API's pool, the dashboard's).
    pools: Vec<PgPool>,
    /// PostgreSQL's store, told that this replica leaves before they close.
    postgres: Option<Arc<PgTaskStore>>,
}

impl std::fmt::Debug for Backends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backends")
            .field("name", &self.name)
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

impl Backends {
    /// `store` in every role.
    pub fn from_store<S>(store: Arc<S>, name: &'static str, location: String) -> Self
    where
        S: TaskStore + ExecutionStore + DispatchStore + OperationsStore + InsightsSource,
    {
        Self {
            store: store.clone(),
            execution: store.clone(),
            dispatch: store.clone(),
            operations: store.clone(),
            insights: S::insights_reader(&store),
            keys: Arc::new(MemoryKeys::default()),
            name,
            location,
            pools: Vec::new(),
            postgres: None,
        }
    }

    /// Opens the store at `location`; gives up early when `shutdown` fires.
    pub async fn open(
        location: &StoreLocation,
        migrations: Migrations,
        pool: PoolSettings,
        config: StoreConfig,
        shutdown: &CancellationToken,
    ) -> Result<Self, StartupError> {
        match location {
            StoreLocation::Postgres(url) => {
                let (pool, options) = pg_pool(url, pool)?;
                let store = Arc::new(prepare(&pool, &options, migrations, config, shutdown).await?);
                let insights_pool = store.insights().pool().clone();
                Ok(Self {
                    keys: Arc::new(PgKeys::new(pool.clone())),
                    pools: vec![pool, insights_pool],
                    postgres: Some(store.clone()),
                    ..Self::from_store(store, "postgres", redact(url))
                })
            }
            StoreLocation::Sqlite(path) => {
                let store = sqlite::open(path, config)
                    .await
                    .map_err(|err| StartupError::Config(err.to_string()))?;
                let location = std::path::absolute(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string();
                let keys = sqlite::keys(path)
                    .await
                    .map_err(|err| StartupError::Config(err.to_string()))?;
                Ok(Self {
                    keys: Arc::new(keys),
                    ..Self::from_store(Arc::new(store), "sqlite", location)
                })
            }
            StoreLocation::Memory => {
                let store = MemoryTaskStore::new(config).map_err(StartupError::Store)?;
                let location = "in memory: lost when the process exits".to_owned();
                Ok(Self::from_store(Arc::new(store), "memory", location))
            }
        }
    }

    /// The same stores, with API keys kept in `keys`.
    pub fn with_keys(self, keys: Arc<dyn KeyStore>) -> Self {
        Self { keys, ..self }
    }

    pub async fn close(&self) {
        if let Some(store) = &self.postgres {
            store.leave().await;
        }
        for pool in &self.pools {
            pool.close().await;
        }
    }
}

/// `taskstore migrate`: applies pending migrations and exits.
pub async fn migrate(location: &StoreLocation, pool: PoolSettings) -> Result<(), StartupError> {
    match location {
        StoreLocation::Postgres(url) => {
            let (pool, options) = pg_pool(url, pool)?;
            if let Some(cause) = postgres::unreachable_because(&options).await {
                return Err(StartupError::DatabaseUnreachable(cause));
            }
            postgres::migrate(&pool).await?;
            tracing::info!("migrations applied");
            pool.close().await;
            Ok(())
        }
        StoreLocation::Sqlite(path) => {
            // Opening migrates (after checking the file).
            sqlite::open(path, StoreConfig::default())
                .await
                .map_err(|err| StartupError::Config(err.to_string()))?;
            tracing::info!(path = %path.display(), "migrations applied");
            Ok(())
        }
        StoreLocation::Memory => Err(StartupError::Config(
            "the in-memory store has nothing to migrate".into(),
        )),
    }
}

/// The API keys of the database at `location`, for `taskstore keys`: the
/// schema must be migrated already (PostgreSQL), or is (SQLite).
pub async fn open_keys(
    location: &StoreLocation,
    pool: PoolSettings,
) -> Result<Arc<dyn KeyStore>, StartupError> {
    match location {
        StoreLocation::Postgres(url) => {
            let (pool, options) = pg_pool(url, pool)?;
            if let Some(cause) = postgres::unreachable_because(&options).await {
                return Err(StartupError::DatabaseUnreachable(cause));
            }
            let state = postgres::schema_state(&pool)
                .await
                .map_err(|err| StartupError::Store(postgres::store_error(err)))?;
            if !state.pending.is_empty() {
                return Err(StartupError::MigrationsPending(
                    "the database is not migrated: run `taskstore migrate` first".to_owned(),
                ));
            }
            Ok(Arc::new(PgKeys::new(pool)))
        }
        StoreLocation::Sqlite(path) => {
            sqlite::open(path, StoreConfig::default())
                .await
                .map_err(|err| StartupError::Config(err.to_string()))?;
            let keys = sqlite::keys(path)
                .await
                .map_err(|err| StartupError::Config(err.to_string()))?;
            Ok(Arc::new(keys))
        }
        StoreLocation::Memory => Err(StartupError::Config(
            "keys in memory would vanish with this command: use a postgres:// or sqlite:// --database-url".into(),
        )),
    }
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

fn pg_pool(url: &str, settings: PoolSettings) -> Result<(PgPool, PgConnectOptions), StartupError> {
    let options: PgConnectOptions = url.parse().map_err(StartupError::DatabaseUrl)?;
    Ok((postgres::lazy_pool(options.clone(), settings), options))
}

/// Migrates (or waits for the migrations) and opens the store, waiting
/// (with backoff) for a database that is not reachable yet; gives up only
/// on errors a retry cannot fix.
async fn prepare(
    pool: &PgPool,
    options: &PgConnectOptions,
    migrations: Migrations,
    config: StoreConfig,
    shutdown: &CancellationToken,
) -> Result<PgTaskStore, StartupError> {
    let mut delay = Duration::from_millis(250);
    loop {
        let attempt = async {
            match migrations {
                Migrations::Apply => postgres::migrate(pool).await?,
                Migrations::Await => check_migrated(pool).await?,
            }
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
        if let StartupError::MigrationsPending(pending) = &error {
            tracing::warn!(pending = %pending, retry_in_ms = delay.as_millis() as u64, "database migrations pending; not listening until `taskstore migrate` (the migrations job) has applied them");
        } else {
            let cause = postgres::unreachable_because(options)
                .await
                .unwrap_or_else(|| error.to_string());
            tracing::warn!(error = %cause, retry_in_ms = delay.as_millis() as u64, "database not reachable yet; not listening until it is; retrying");
        }
        tokio::select! {
            () = shutdown.cancelled() => return Err(StartupError::Interrupted),
            () = tokio::time::sleep(delay) => {}
        }
        delay = (delay * 2).min(Duration::from_secs(10));
    }
}

/// With `--migrations await`: whether the database has every migration
/// this binary knows, the same as this binary's.
async fn check_migrated(pool: &PgPool) -> Result<(), StartupError> {
    let state = postgres::schema_state(pool)
        .await
        .map_err(|err| StartupError::Store(postgres::store_error(err)))?;
    if !state.different.is_empty() {
        return Err(StartupError::MigrationsDiffer(state.different));
    }
    match state.pending.as_slice() {
        [] => Ok(()),
        pending => Err(StartupError::MigrationsPending(
            pending
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        )),
    }
}

fn is_retryable(err: &StartupError) -> bool {
    match err {
        StartupError::MigrationsPending(_) => true,
        StartupError::Migrate(
            sqlx::migrate::MigrateError::Execute(err)
            | sqlx::migrate::MigrateError::ExecuteMigration(err, _),
        ) => postgres::is_unavailable(err),
        StartupError::Store(crate::StoreError::Unavailable(_)) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            redact("postgres://app:s3cret@db:5432/tasks"),
            "postgres://app:***@db:5432/tasks"
        );
        assert_eq!(redact("postgres://app@db/tasks"), "postgres://app@db/tasks");
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
    }
}
