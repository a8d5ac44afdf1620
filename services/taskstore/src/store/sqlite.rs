//! The SQLite backend: the in-process engine (the same code as the
//! in-memory store, so the same behaviour) with every change written through
//! to one SQLite file before it is acknowledged. The default of
//! `taskstore dev`: durable, a single file, one process. All live tasks are
//! held in memory too, which suits a laptop, not a fleet (use PostgreSQL).
//!
//! Opening a file checks it first, without writing: a file that is not a
//! SQLite database, or whose schema is newer than this binary knows, is
//! refused with a clear error and left untouched. An older file is migrated.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};

use super::StoreConfig;
use super::memory::MemoryTaskStore;
use super::memory::persist::{Persistence, StoredJob, StoredRecord};
use crate::error::StoreError;
use crate::store::statements::sql;

/// The embedded migrations under `migrations/sqlite`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// The first bytes of every SQLite database file.
const SQLITE_HEADER: &[u8] = b"SQLite format 3\0";
const CURSOR_KEY_NAME: &str = "cursor_hmac_key";

/// Why a SQLite file could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "{path} is not a taskstore data file (not a SQLite database, or corrupt): {detail}; it was left untouched"
    )]
    Corrupt { path: PathBuf, detail: String },
    #[error(
        "{path} was written by a newer taskstore (schema version {found}; this one knows up to {known}); it was left untouched: upgrade taskstore or use another file"
    )]
    FromTheFuture {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("cannot open {path}: {source}")]
    Open { path: PathBuf, source: sqlx::Error },
    #[error("migrating {path} failed: {source}")]
    Migrate {
        path: PathBuf,
        source: sqlx::migrate::MigrateError,
    },
    #[error("cannot load {path}: {source}")]
    Load { path: PathBuf, source: StoreError },
}

/// The path of a `sqlite://path` (or `sqlite:path`) URL.
pub fn path_of(url: &str) -> Option<PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or_default();
    (!path.is_empty()).then(|| PathBuf::from(path))
}

/// The API keys kept in the (already opened, so migrated) file at `path`,
/// through a connection of their own.
pub async fn keys(path: &Path) -> Result<super::keys::SqliteKeys, OpenError> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(Duration::from_secs(5));
    Ok(super::keys::SqliteKeys::new(connect(path, options).await?))
}

/// A pool of one connection to the file at `path` (the engine serializes
/// its writes anyway).
async fn connect(path: &Path, options: SqliteConnectOptions) -> Result<SqlitePool, OpenError> {
    SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .map_err(|source| OpenError::Open {
            path: path.to_owned(),
            source,
        })
}

/// Opens (creating, or migrating, as needed) the store kept in `path`.
pub async fn open(path: &Path, config: StoreConfig) -> Result<MemoryTaskStore, OpenError> {
    if path.exists() {
        inspect(path).await?;
    }
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        // Every acknowledged change survives a power loss, not only a crash.
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(5));
    let pool = connect(path, options).await?;
    MIGRATOR
        .run(&pool)
        .await
        .map_err(|source| OpenError::Migrate {
            path: path.to_owned(),
            source,
        })?;
    let persistence = Arc::new(SqlitePersistence { pool });
    let store = MemoryTaskStore::open_persistent(config, persistence)
        .await
        .map_err(|source| OpenError::Load {
            path: path.to_owned(),
            source,
        })?;
    store
        .requeue_unqueued_jobs()
        .await
        .map_err(|source| OpenError::Load {
            path: path.to_owned(),
            source,
        })?;
    Ok(store)
}

/// Checks an existing file without writing to it.
async fn inspect(path: &Path) -> Result<(), OpenError> {
    let corrupt = |detail: String| OpenError::Corrupt {
        path: path.to_owned(),
        detail,
    };
    let mut header = [0u8; 16];
    let read = std::fs::File::open(path)
        .and_then(|mut file| std::io::Read::read(&mut file, &mut header))
        .map_err(|err| corrupt(err.to_string()))?;
    if read == 0 {
        // An empty file: SQLite treats it as a new database.
        return Ok(());
    }
    if read < SQLITE_HEADER.len() || header != SQLITE_HEADER {
        return Err(corrupt("it does not start with the SQLite header".into()));
    }
    let mut connection = SqliteConnectOptions::from_str("sqlite://")
        .map_err(|source| OpenError::Open {
            path: path.to_owned(),
            source,
        })?
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .map_err(|err| corrupt(err.to_string()))?;
    let known = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    let has_history: bool = sqlx::query_scalar(
        sql!(Sqlite: "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = '_sqlx_migrations'"),
    )
    .fetch_one(&mut connection)
    .await
    .map_err(|err| corrupt(err.to_string()))?;
    let found: Option<i64> = if has_history {
        sqlx::query_scalar(sql!(Sqlite: "SELECT max(version) FROM _sqlx_migrations"))
            .fetch_one(&mut connection)
            .await
            .map_err(|err| corrupt(err.to_string()))?
    } else {
        None
    };
    let _ = connection.close().await;
    match found {
        Some(found) if found > known => Err(OpenError::FromTheFuture {
            path: path.to_owned(),
            found,
            known,
        }),
        _ => Ok(()),
    }
}

/// The engine's write-through target.
#[derive(Debug)]
struct SqlitePersistence {
    pool: SqlitePool,
}

fn internal(err: impl std::fmt::Display) -> StoreError {
    tracing::error!(error = %err, "sqlite error");
    StoreError::Internal("database error".into())
}

#[async_trait]
impl Persistence for SqlitePersistence {
    async fn write(
        &self,
        tasks: Vec<((String, String), Option<StoredRecord>)>,
        jobs: Vec<(u64, Option<StoredJob>)>,
    ) -> Result<(), StoreError> {
        if tasks.is_empty() && jobs.is_empty() {
            return Ok(());
        }
        // SQLite's begin rolls back when cancelled (sqlx#2057); the
        // PostgreSQL one does not (`postgres/transaction.rs`).
        #[allow(clippy::disallowed_methods)]
        let mut tx = self.pool.begin().await.map_err(internal)?;
        // A record or job present is written whole; an absent one deleted.
        for ((tenant, task_id), record) in tasks {
            let statement = match record {
                Some(record) => sqlx::query(sql!(Sqlite: "INSERT OR REPLACE INTO tasks (tenant_id, task_id, record) VALUES (?, ?, ?)"))
                    .bind(tenant)
                    .bind(task_id)
                    .bind(serde_json::to_string(&record).map_err(internal)?),
                None => sqlx::query(sql!(Sqlite: "DELETE FROM tasks WHERE tenant_id = ? AND task_id = ?"))
                    .bind(tenant)
                    .bind(task_id),
            };
            statement.execute(&mut *tx).await.map_err(internal)?;
        }
        for (id, job) in jobs {
            let id = i64::try_from(id).map_err(internal)?;
            let statement = match job {
                Some(job) => sqlx::query(
                    sql!(Sqlite: "INSERT OR REPLACE INTO dispatch_outbox (id, job) VALUES (?, ?)"),
                )
                .bind(id)
                .bind(serde_json::to_string(&job).map_err(internal)?),
                None => {
                    sqlx::query(sql!(Sqlite: "DELETE FROM dispatch_outbox WHERE id = ?")).bind(id)
                }
            };
            statement.execute(&mut *tx).await.map_err(internal)?;
        }
        #[allow(clippy::disallowed_methods)] // SQLite's: see `begin` above
        tx.commit().await.map_err(internal)
    }

    async fn load(&self) -> Result<(Vec<StoredRecord>, Vec<StoredJob>), StoreError> {
        let records: Vec<String> = sqlx::query_scalar(sql!(Sqlite: "SELECT record FROM tasks"))
            .fetch_all(&self.pool)
            .await
            .map_err(internal)?;
        let jobs: Vec<String> =
            sqlx::query_scalar(sql!(Sqlite: "SELECT job FROM dispatch_outbox ORDER BY id"))
                .fetch_all(&self.pool)
                .await
                .map_err(internal)?;
        let records = records
            .iter()
            .map(|json| serde_json::from_str(json).map_err(internal))
            .collect::<Result<_, _>>()?;
        let jobs = jobs
            .iter()
            .map(|json| serde_json::from_str(json).map_err(internal))
            .collect::<Result<_, _>>()?;
        Ok((records, jobs))
    }

    async fn cursor_key(&self) -> Result<[u8; 32], StoreError> {
        let mut candidate = [0u8; 32];
        getrandom::getrandom(&mut candidate).map_err(internal)?;
        sqlx::query(
            sql!(Sqlite: "INSERT OR IGNORE INTO store_secrets (name, value) VALUES (?, ?)"),
        )
        .bind(CURSOR_KEY_NAME)
        .bind(&candidate[..])
        .execute(&self.pool)
        .await
        .map_err(internal)?;
        let stored: Vec<u8> =
            sqlx::query_scalar(sql!(Sqlite: "SELECT value FROM store_secrets WHERE name = ?"))
                .bind(CURSOR_KEY_NAME)
                .fetch_one(&self.pool)
                .await
                .map_err(internal)?;
        stored
            .try_into()
            .map_err(|_| internal("stored cursor key has the wrong length"))
    }
}
