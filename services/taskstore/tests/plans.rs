//! When the service's PostgreSQL connections cache their plans
//! (store/postgres/plans.rs): each statement planned with its values while
//! the tasks table is small, cached plans once it is large.

mod common;

use std::time::Duration;

/// While the tasks table is small, connections plan every statement with its
/// values: a plan cached then (a sequential scan, or the listing index for a
/// lookup by id) would stay while the table grows. Once its primary key is
/// past 16 pages, every connection caches plans, those opened before being
/// replaced as they are released (store/postgres/plans.rs).
#[tokio::test]
async fn plans_are_cached_once_the_tasks_table_is_large() {
    let pool = common::migrated_pool().await;
    let modes = || async {
        // Every connection of the pool at once (test_pool_settings: 10).
        let mut held = Vec::new();
        for _ in 0..10 {
            held.push(pool.acquire().await.expect("connection"));
        }
        let mut modes = Vec::new();
        for conn in &mut held {
            let mode: String = sqlx::query_scalar("SHOW plan_cache_mode")
                .fetch_one(&mut **conn)
                .await
                .expect("show");
            modes.push(mode);
        }
        modes
    };
    assert!(
        modes().await.iter().all(|mode| mode == "force_custom_plan"),
        "an empty table: every statement planned with its values"
    );
    sqlx::query(
        "INSERT INTO tasks (tenant_id, task_id, status, request_id_json, request_json,
                            created_at, last_updated_at, poll_interval_ms)
         SELECT 'default', 'a-task-id-long-enough-to-fill-the-index-' || i, 'working', '1',
                '{}', now(), now(), 1000
         FROM generate_series(1, 4000) AS i",
    )
    .execute(&pool)
    .await
    .expect("rows");
    // A release reads the size at most once a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let now = modes().await;
        if now.iter().all(|mode| mode == "auto") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "connections still planning every statement: {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
