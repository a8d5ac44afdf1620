//! Calls cancelled at any moment (a client hanging up, a deadline) leave
//! no pooled connection inside a transaction: before the fix, a cancelled
//! `BEGIN` (sqlx#4393) left one, and the next caller's writes ran in it
//! uncommitted ("task not found" for a task just created) while its locks
//! deadlocked change-listener registrations (issue 37, defect 7).

use std::time::{Duration, Instant};

use taskstore::domain::{JsonObject, NewTask, RequestId, Scope, TaskId, TenantId};
use taskstore::store::postgres::{self, PgTaskStore};
use taskstore::store::{StoreConfig, TaskStore};

use super::common;

fn scope_of(tenant: &str) -> Scope {
    Scope {
        tenant: TenantId::parse(tenant).expect("tenant"),
        session: None,
    }
}

/// An undispatched task (also used by the other modules here).
pub(super) fn plain_task() -> NewTask {
    NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: Default::default(),
        poll_interval: None,
        request_id: RequestId::parse("1").expect("id"),
        request: JsonObject::parse(r#"{"method":"tools/call","params":{"name":"echo"}}"#)
            .expect("json"),
        dispatch: None,
        trace_context: None,
    }
}

/// The sessions of `application` that sit inside a transaction.
async fn sessions_in_a_transaction(application: &str) -> i64 {
    let admin = common::admin_pool().await;
    let count = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity
         WHERE application_name = $1 AND state LIKE 'idle in transaction%'",
    )
    .bind(application)
    .fetch_one(&admin)
    .await
    .expect("read pg_stat_activity");
    admin.close().await;
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cancelled_calls_leave_no_connection_inside_a_transaction() {
    let (options, schema) = common::fresh_schema().await;
    let application = format!("cancelled {schema}");
    let options = options.application_name(&application);
    let pool = postgres::lazy_pool(options, common::test_pool_settings());
    postgres::migrate(&pool).await.expect("migrations apply");
    let store = PgTaskStore::open(pool, StoreConfig::default())
        .await
        .expect("store opens");

    // Each waiting call of a new tenant registers it in a transaction of
    // its own; cancel them at every moment of the first millisecond,
    // where their BEGIN is in flight.
    // (The timer's granularity is a millisecond: the call runs on another
    // runtime thread while this one spins, then aborts it.)
    let missing = TaskId::parse("never-created").expect("id");
    for round in 0..600u64 {
        let scope = scope_of(&format!("tenant-{round}"));
        let (store, missing) = (store.clone(), missing.clone());
        let call = tokio::spawn(async move {
            store
                .wait_for_result(&scope, &missing, Duration::from_millis(1))
                .await
        });
        let cancel_at = Instant::now() + Duration::from_micros((round * 7) % 1_500);
        while Instant::now() < cancel_at {
            std::hint::spin_loop();
        }
        call.abort();
        let _ = call.await;
    }
    // Registrations the cancelled calls started finish on their own (one
    // at a time, each under the table lock); a leaked transaction would
    // stay open for good.
    let settled_by = Instant::now() + Duration::from_secs(20);
    let mut open = sessions_in_a_transaction(&application).await;
    while open > 0 && Instant::now() < settled_by {
        tokio::time::sleep(Duration::from_millis(100)).await;
        open = sessions_in_a_transaction(&application).await;
    }
    assert_eq!(
        open, 0,
        "a cancelled call left a pooled connection inside a transaction"
    );

    // And every task created afterwards is committed: another connection
    // reads each one at once.
    let reader = common::admin_pool().await;
    for _ in 0..40 {
        let task = store
            .create_task(&scope_of("after"), plain_task())
            .await
            .expect("create");
        let seen: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM {schema}.tasks WHERE task_id = $1"
        ))
        .bind(task.task_id.as_str())
        .fetch_one(&reader)
        .await
        .expect("read the task from another connection");
        assert_eq!(seen, 1, "task {} was not committed", task.task_id);
    }
    reader.close().await;
}
