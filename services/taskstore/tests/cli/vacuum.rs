//! The startup warning about autovacuum: the task tables bloat without it,
//! so a service on a database (or tables) where it is off says so once.

use std::time::Duration;

use crate::harness::{fresh_database_url, start_serve};

async fn autovacuum_on_server_wide(database: &str) -> bool {
    let pool = sqlx::PgPool::connect(database).await.expect("connect");
    let on: bool = sqlx::query_scalar("SELECT current_setting('autovacuum') = 'on'")
        .fetch_one(&pool)
        .await
        .expect("show autovacuum");
    pool.close().await;
    on
}

fn warned(service: &mut crate::harness::Service) -> bool {
    service
        .drain_logs()
        .iter()
        .any(|line| line.contains("autovacuum is off for the task tables") && line.contains("WARN"))
}

#[tokio::test]
async fn the_service_warns_when_the_task_tables_are_not_vacuumed() {
    let database = fresh_database_url().await;
    let server_wide = autovacuum_on_server_wide(&database).await;

    // As configured: a warning exactly when the server has autovacuum off.
    let mut service = start_serve(&database, &["--amqp-url", "none"]);
    service.stop(Duration::from_secs(10));
    assert_eq!(warned(&mut service), !server_wide);

    // Turned off for one of the tables: always a warning.
    let pool = sqlx::PgPool::connect(&database).await.expect("connect");
    sqlx::query("ALTER TABLE dispatch_outbox SET (autovacuum_enabled = false)")
        .execute(&pool)
        .await
        .expect("disable autovacuum on the outbox");
    pool.close().await;
    let mut service = start_serve(&database, &["--amqp-url", "none"]);
    service.stop(Duration::from_secs(10));
    assert!(warned(&mut service), "the outbox's autovacuum is off");
}
