//! PostgreSQL-specific behaviour that the trait cannot express: identical
//! timestamps, replicas migrating and sharing cursors at once.

mod common;

use std::collections::HashSet;

use taskstore::domain::{PageRequest, Scope};
use taskstore::store::postgres::{self, PgTaskStore};
use taskstore::store::{StoreConfig, TaskStore};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_can_migrate_at_once() {
    let (options, schema) = common::fresh_schema().await;
    let mut migrations = tokio::task::JoinSet::new();
    for _ in 0..5 {
        let pool = postgres::lazy_pool(options.clone(), common::test_pool_settings());
        migrations.spawn(async move { postgres::migrate(&pool).await });
    }
    for outcome in migrations.join_all().await {
        outcome.expect("every replica's migration succeeds");
    }
    let pool = postgres::lazy_pool(options, common::test_pool_settings());
    postgres::migrate(&pool)
        .await
        .expect("migrating again is a no-op");
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
    )
    .bind(&schema)
    .fetch_all(&pool)
    .await
    .expect("list tables");
    assert_eq!(
        tables,
        [
            "_sqlx_migrations",
            "dispatch_outbox",
            "store_secrets",
            "tasks"
        ]
    );
}

#[tokio::test]
async fn tasks_sharing_a_timestamp_page_without_gaps_or_duplicates() {
    let store = common::pg_store(StoreConfig::default()).await;
    // Fifty tasks committed with one timestamp, as a batch insert would.
    sqlx::query(
        "INSERT INTO tasks (tenant_id, task_id, status, request_id_json, request_json,
                            created_at, last_updated_at, poll_interval_ms)
         SELECT 'default', 'same-' || lpad(i::text, 3, '0'), 'working', '1', '{}',
                '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 1000
         FROM generate_series(1, 50) AS i",
    )
    .execute(store.pool())
    .await
    .expect("insert");

    let scope = Scope::tenant_wide();
    let mut seen = Vec::new();
    let mut cursor = None;
    loop {
        let page = store
            .list_tasks(
                &scope,
                PageRequest {
                    cursor,
                    page_size: Some(7),
                },
            )
            .await
            .expect("list");
        seen.extend(page.tasks.into_iter().map(|t| t.task_id.to_string()));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    let expected: Vec<String> = (1..=50).map(|i| format!("same-{i:03}")).collect();
    assert_eq!(
        seen, expected,
        "ordered by id within one timestamp, each once"
    );
    assert_eq!(seen.iter().collect::<HashSet<_>>().len(), 50);
}

#[tokio::test]
async fn replicas_share_the_cursor_key() {
    let pool = common::migrated_pool().await;
    let first = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let second = PgTaskStore::open(pool, StoreConfig::default())
        .await
        .expect("open");
    let scope = Scope::tenant_wide();
    for _ in 0..3 {
        first
            .create_task(&scope, common_task())
            .await
            .expect("create");
    }
    let page = first
        .list_tasks(
            &scope,
            PageRequest {
                cursor: None,
                page_size: Some(1),
            },
        )
        .await
        .expect("list");
    let rest = second
        .list_tasks(
            &scope,
            PageRequest {
                cursor: page.next_cursor,
                page_size: Some(10),
            },
        )
        .await
        .expect("a cursor from one replica works on another");
    assert_eq!(rest.tasks.len(), 2);
}

fn common_task() -> taskstore::domain::NewTask {
    taskstore::domain::NewTask {
        task_id: None,
        ttl: None,
        request_id: taskstore::domain::RequestId::parse("\"r\"").expect("id"),
        request: taskstore::domain::JsonObject::parse("{}").expect("json"),
        dispatch: None,
    }
}
