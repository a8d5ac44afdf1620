//! The schema's migrations: applied by `taskstore migrate` (or by `serve`
//! itself, by default), or awaited by a `serve` told to leave them to a
//! migrations job, so that several replicas roll out on a schema one
//! process migrated.

use crate::store::statements::sql;
use sqlx::PgPool;
use sqlx::migrate::MigrateError;

/// The embedded migrations under `migrations/postgres`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// PostgreSQL's "undefined_table": no migration ever ran here.
const UNDEFINED_TABLE: &str = "42P01";

/// Applies pending migrations. Safe with several replicas starting at once:
/// sqlx holds a PostgreSQL advisory lock while it migrates.
pub async fn migrate(pool: &PgPool) -> Result<(), MigrateError> {
    MIGRATOR.run(pool).await
}

/// How the database's schema stands against this binary's migrations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SchemaState {
    /// Versions this binary has that the database has not applied yet.
    pub pending: Vec<i64>,
    /// Versions applied with other contents than this binary's: the
    /// database was migrated by a different build, and no wait fixes that.
    pub different: Vec<i64>,
}

/// Compares the applied migrations with this binary's, without changing
/// anything (a database newer than the binary is fine: migrations only
/// add, so the previous release runs on the next one's schema).
pub async fn schema_state(pool: &PgPool) -> Result<SchemaState, sqlx::Error> {
    let applied: Vec<(i64, Vec<u8>)> = match sqlx::query_as(sql!(
        "SELECT version, checksum FROM _sqlx_migrations WHERE success"
    ))
    .fetch_all(pool)
    .await
    {
        Ok(rows) => rows,
        Err(sqlx::Error::Database(err)) if err.code().as_deref() == Some(UNDEFINED_TABLE) => {
            Vec::new()
        }
        Err(err) => return Err(err),
    };
    let mut state = SchemaState::default();
    for migration in MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration())
    {
        match applied
            .iter()
            .find(|(version, _)| *version == migration.version)
        {
            None => state.pending.push(migration.version),
            Some((_, checksum)) if checksum.as_slice() != &*migration.checksum => {
                state.different.push(migration.version);
            }
            Some(_) => {}
        }
    }
    Ok(state)
}
