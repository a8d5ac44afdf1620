//! Who migrates: `serve --migrations await` leaves the schema to a
//! migrations job (`taskstore migrate`), waits for it without listening, and
//! refuses a database another build migrated.

use std::process::Command;
use std::time::Duration;

use crate::harness::{BIN, fresh_database_url, spawn, start_serve};

fn serve_awaiting(database: &str) -> Command {
    let mut command = Command::new(BIN);
    command
        .args([
            "--log-format",
            "json",
            "serve",
            "--auth",
            "none",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--migrations", "await", "--amqp-url", "none"])
        .env("TASKSTORE_DATABASE_URL", database);
    command
}

fn migrate(database: &str) {
    let output = Command::new(BIN)
        .args(["--log-format", "json", "migrate"])
        .env("TASKSTORE_DATABASE_URL", database)
        .output()
        .expect("run migrate");
    assert!(output.status.success(), "{output:?}");
}

#[tokio::test]
async fn a_service_awaiting_migrations_listens_once_the_job_has_run() {
    let database = fresh_database_url().await;
    let mut service = spawn(serve_awaiting(&database));
    let waiting = service.wait_for_log(Duration::from_secs(30), |event| {
        event["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("database migrations pending"))
    });
    assert!(
        waiting["pending"]
            .as_str()
            .is_some_and(|p| p.starts_with('1')),
        "names the pending versions: {waiting}"
    );
    assert!(
        !service
            .seen
            .iter()
            .any(|line| line.contains("\"listening\"")),
        "not listening on an unmigrated database"
    );

    migrate(&database);
    service.wait_for_listening(Duration::from_secs(30));
    service.stop(Duration::from_secs(10));
}

#[tokio::test]
async fn a_service_awaiting_migrations_refuses_a_database_another_build_migrated() {
    let database = fresh_database_url().await;
    migrate(&database);
    let pool = sqlx::PgPool::connect(&database).await.expect("connect");
    sqlx::query("UPDATE _sqlx_migrations SET checksum = '\\x00'::bytea WHERE version = 1")
        .execute(&pool)
        .await
        .expect("alter the record of migration 1");
    pool.close().await;

    let output = serve_awaiting(&database).output().expect("run serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("migrated by a different build of taskstore (migrations [1]"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_default_service_applies_migrations_itself() {
    let database = fresh_database_url().await;
    let mut service = start_serve(&database, &["--amqp-url", "none"]);
    service.stop(Duration::from_secs(10));
    let output = serve_awaiting(&database);
    let mut awaiting = spawn(output);
    awaiting.wait_for_listening(Duration::from_secs(30));
    awaiting.stop(Duration::from_secs(10));
}

#[tokio::test]
async fn the_service_reaches_postgresql_over_tls_when_the_url_asks() {
    let application = format!("taskstore-tls-{}", std::process::id());
    let database = format!(
        "{}&sslmode=require&application_name={application}",
        fresh_database_url().await
    );
    let mut service = start_serve(&database, &["--amqp-url", "none"]);
    let pool = sqlx::PgPool::connect(&crate::common::database_url())
        .await
        .expect("connect");
    let (connections, encrypted): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE s.ssl)
           FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid)
          WHERE a.application_name = $1",
    )
    .bind(&application)
    .fetch_one(&pool)
    .await
    .expect("read pg_stat_ssl");
    pool.close().await;
    assert!(connections > 0, "the service holds connections");
    assert_eq!(encrypted, connections, "every connection is encrypted");
    service.stop(Duration::from_secs(10));
}
