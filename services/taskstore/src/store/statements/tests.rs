//! Prepares every registered statement against a freshly migrated schema
//! (PostgreSQL) and file (SQLite): a statement that names a column, table
//! or function the migrations do not make, or is not valid SQL, fails here
//! with the place that wrote it, before the suites that run it.
//!
//! Not registered, because their text is made at run time:
//! - the listing and search pages (`postgres/listing.rs`, `search.rs`):
//!   `QueryBuilder`s whose filters are pushed per request; prepared here
//!   from their builders with every filter on (`dynamic_statements`);
//! - `SET application_name` of the change listener (a utility statement
//!   with a constant name) and the test helpers' schema statements.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, Executor};

use super::{Dialect, Statement};

const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn registered(dialect: Dialect) -> Vec<&'static Statement> {
    let mut statements: Vec<_> = inventory::iter::<Statement>
        .into_iter()
        .filter(|statement| statement.dialect == dialect)
        .collect();
    statements.sort_by_key(|statement| statement.at);
    statements
}

fn report(failures: &[String], count: usize, dialect: Dialect) {
    assert!(
        failures.is_empty(),
        "{} of {count} {dialect:?} statements do not prepare:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn every_postgres_statement_prepares_against_the_migrated_schema() {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
    let options: PgConnectOptions = url.parse().expect("DATABASE_URL is a PostgreSQL URL");
    let mut admin = sqlx::PgConnection::connect_with(&options)
        .await
        .unwrap_or_else(|err| {
            panic!("PostgreSQL is not reachable at {url} (set DATABASE_URL): {err}")
        });
    let mut suffix = [0u8; 6];
    getrandom::getrandom(&mut suffix).expect("os randomness");
    let schema = format!(
        "stmtcheck_{}",
        suffix
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    );
    admin
        .execute(format!("CREATE SCHEMA {schema}").as_str())
        .await
        .expect("schema");
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(options.options([("search_path", schema.as_str())]))
        .await
        .expect("pool");
    crate::store::postgres::migrate(&pool)
        .await
        .expect("migrations");

    let statements = registered(Dialect::Postgres);
    // Fewer would mean the registration stopped working.
    assert!(statements.len() > 60, "{} registered", statements.len());
    let mut failures = Vec::new();
    let mut conn = pool.acquire().await.expect("connection");
    for statement in &statements {
        if let Err(err) = conn.prepare(statement.text).await {
            failures.push(format!("{}: {err}\n    {}", statement.at, statement.text));
        }
    }
    for (name, text) in crate::store::postgres::dynamic_statements() {
        if let Err(err) = conn.prepare(text.as_str()).await {
            failures.push(format!("{name}: {err}\n    {text}"));
        }
    }
    drop(conn);
    pool.close().await;
    admin
        .execute(format!("DROP SCHEMA {schema} CASCADE").as_str())
        .await
        .expect("drop schema");
    report(&failures, statements.len(), Dialect::Postgres);
}

#[tokio::test]
async fn every_sqlite_statement_prepares_against_the_migrated_file() {
    let dir = std::env::temp_dir().join(format!("taskstore-stmtcheck-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("store.db");
    let _ = std::fs::remove_file(&path);
    crate::store::sqlite::open(&path, crate::store::StoreConfig::default())
        .await
        .expect("the file, migrated");
    let keys_path = path.clone();
    let mut conn = sqlx::SqliteConnection::connect_with(
        &sqlx::sqlite::SqliteConnectOptions::new().filename(&keys_path),
    )
    .await
    .expect("connection");
    let statements = registered(Dialect::Sqlite);
    assert!(statements.len() > 10, "{} registered", statements.len());
    let mut failures = Vec::new();
    for statement in &statements {
        if let Err(err) = conn.prepare(statement.text).await {
            failures.push(format!("{}: {err}\n    {}", statement.at, statement.text));
        }
    }
    drop(conn);
    let _ = std::fs::remove_dir_all(&dir);
    report(&failures, statements.len(), Dialect::Sqlite);
}

/// Statements run through a parameter (their callers wrap them in `sql!`),
/// or made at run time (listed in this module's doc): the calls the scan
/// below lets through, by file and argument.
const UNREGISTERED_CALLS: &[(&str, &str)] = &[
    ("postgres/mod.rs", "sql)"),
    ("postgres/held.rs", "sql)"),
    ("postgres/dispatch.rs", "sql)"),
    ("postgres/plans.rs", "sql)"),
    ("postgres/feed/listener.rs", "&format!("),
];

/// Every `sqlx::query…(` in the stores' code writes its statement through
/// `sql!`, so that none escapes the check above.
#[test]
fn every_statement_of_the_stores_is_registered() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/store");
    let mut unregistered = Vec::new();
    let mut seen = 0;
    let mut dirs = vec![root.clone()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("store sources") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|ext| ext != "rs")
                || path.ends_with("statements/tests.rs")
            {
                continue;
            }
            let name = path
                .strip_prefix(&root)
                .expect("below the root")
                .to_string_lossy()
                .into_owned();
            let source = std::fs::read_to_string(&path).expect("source");
            for (at, _) in source.match_indices("sqlx::query") {
                let rest = &source[at + "sqlx::query".len()..];
                let Some(open) = rest.find('(') else { continue };
                // `sqlx::query`, `_as`, `_scalar`, with or without `::<…>`.
                let between = &rest[..open];
                if !(between.is_empty()
                    || between.starts_with("_as")
                    || between.starts_with("_scalar")
                    || between.starts_with("::<"))
                {
                    continue;
                }
                seen += 1;
                let argument = rest[open + 1..].trim_start();
                let registered = argument.starts_with("sql!(")
                    || argument.starts_with("$crate::store::statements::sql!(");
                let allowed = UNREGISTERED_CALLS
                    .iter()
                    .any(|(file, start)| name == *file && argument.starts_with(start));
                if !registered && !allowed {
                    let line = source[..at].lines().count() + 1;
                    unregistered.push(format!("store/{name}:{line}"));
                }
            }
        }
    }
    assert!(seen > 60, "the scan found {seen} statements");
    assert!(
        unregistered.is_empty(),
        "statements not written through sql! (store/statements.rs): {unregistered:?}"
    );
}
