//! Issue 41, item 5: tasks at rest (queued for a worker, delayed to a later
//! start, parked on a question, running quietly in a live worker session)
//! cost the periodic passes nothing per task.
//! The reaper, the relay and the sweeper read only what is due, through
//! indexes; this counts the rows they read from PostgreSQL's own statistics.

use std::collections::BTreeMap;
use std::time::Duration;

use sqlx::PgPool;
use taskstore::domain::{
    Claimant, InputKey, InputRequest, ReleaseReason, SessionRenewal, StartTime, TaskId, TenantId,
    ToolName, WorkerSession,
};
use taskstore::store::execution::{DispatchStore, ExecutionStore};
use taskstore::store::postgres::{self, PgTaskStore};
use taskstore::store::{StoreConfig, TaskStore};

use super::{common, dispatched_with};
use common::recorder::Recorder;

const QUEUED: usize = 400;
const DELAYED: usize = 400;
const PARKED: usize = 200;
/// Running quietly, in a live worker session: not due either.
const RUNNING: usize = 200;
const PASSES: u64 = 10;
/// How long until every backend has reported the rows it read.
const STATISTICS_REPORTED: Duration = Duration::from_secs(11);
/// How often the session is renewed, as a worker would: well within its
/// lease (15 s by default).
const SESSION_RENEWED_EVERY: Duration = Duration::from_secs(3);

/// Rows read from each of this schema's tables, by scans and index fetches.
async fn rows_read(admin: &PgPool, schema: &str) -> BTreeMap<String, i64> {
    // A fresh snapshot of the statistics each time.
    sqlx::query("SELECT pg_stat_clear_snapshot()")
        .execute(admin)
        .await
        .expect("clear snapshot");
    sqlx::query_as::<_, (String, i64)>(
        "SELECT relname::text, (COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0))::int8
         FROM pg_stat_user_tables WHERE schemaname = $1",
    )
    .bind(schema)
    .fetch_all(admin)
    .await
    .expect("read statistics")
    .into_iter()
    .collect()
}

/// What each table was read for since `before`, of those read at all.
fn since(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> BTreeMap<String, i64> {
    after
        .iter()
        .map(|(table, rows)| {
            (
                table.clone(),
                rows - before.get(table).copied().unwrap_or(0),
            )
        })
        .filter(|(_, rows)| *rows > 0)
        .collect()
}

async fn park(store: &PgTaskStore, id: &TaskId) {
    let tenant = TenantId::default_tenant();
    let claim = store.claim(&tenant, id, 1, "parker").await.expect("claim");
    let key = InputKey::parse("proceed").expect("key");
    let question = InputRequest::parse(
        r#"{"method":"elicitation/create","params":{"message":"Proceed?","requestedSchema":{"type":"object"}}}"#
            .to_owned(),
    )
    .expect("question");
    let answer = store
        .ask(&tenant, id, &claim.lease_token, &key, &question)
        .await
        .expect("ask");
    assert_eq!(answer, None, "the question waits");
    store
        .release(
            &tenant,
            id,
            &claim.lease_token,
            ReleaseReason::Parked,
            "waiting",
        )
        .await
        .expect("park");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tasks_at_rest_are_not_read_by_the_periodic_passes() {
    let (options, schema) = common::fresh_schema().await;
    let pool = postgres::lazy_pool(options, common::test_pool_settings());
    postgres::migrate(&pool).await.expect("migrations apply");
    let store = PgTaskStore::open(pool, StoreConfig::default())
        .await
        .expect("open");
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    let echo = ToolName::parse("echo").expect("tool");
    let mut parked = Vec::new();
    let mut running = Vec::new();
    for n in 0..QUEUED + PARKED + RUNNING {
        let id = dispatched_with(&store, &echo, None).await;
        if n < PARKED {
            parked.push(id);
        } else if n < PARKED + RUNNING {
            running.push(id);
        }
    }
    let later = StartTime::After(Duration::from_secs(3600));
    for _ in 0..DELAYED {
        dispatched_with(&store, &echo, Some(later)).await;
    }
    // Every job that is due goes to the queue (those past this replica's
    // hand-off after their grace); the delayed ones stay.
    let mut relayed = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let due = QUEUED + PARKED + RUNNING;
    while (relayed as usize) < due {
        assert!(
            tokio::time::Instant::now() < deadline,
            "only {relayed} of {due} jobs were queued"
        );
        relayed += store.relay_due_jobs(&queue, 500).await.expect("relay");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(relayed as usize, due, "no delayed job is queued");
    for id in &parked {
        park(&store, id).await;
    }
    let session = WorkerSession::parse("at-rest-session").expect("session");
    let claimant = Claimant {
        worker: "runner".to_owned(),
        session: Some(session.clone()),
    };
    store
        .renew_session("runner", &session, true)
        .await
        .expect("open the session");
    for id in &running {
        store
            .claim_as(&TenantId::default_tenant(), id, 1, &claimant)
            .await
            .expect("claim in the session");
    }

    // Their own leases end a lease after their claims: the session alone
    // keeps them alive past that, renewed as a worker renews it (a third of
    // a lease apart, so a slow machine does not end it).
    let leases_over = tokio::time::Instant::now()
        + StoreConfig::default().execution.lease_duration
        + Duration::from_secs(1);

    let admin = common::admin_pool().await;
    // As autovacuum would (it is off on the test server): the plans are
    // chosen from what the tables hold, not from guesses.
    sqlx::query(&format!("ANALYZE {schema}.tasks, {schema}.dispatch_outbox"))
        .execute(&admin)
        .await
        .expect("analyze");
    // A backend reports what it read at the end of a transaction a second
    // after its last report, or when it has idled ten seconds: the setup's
    // counts are all in before the passes begin (the wait below is longer).
    let statistics_in = tokio::time::Instant::now() + STATISTICS_REPORTED;
    while tokio::time::Instant::now() < leases_over.max(statistics_in) {
        tokio::time::sleep(SESSION_RENEWED_EVERY).await;
        let renewed = store
            .renew_session("runner", &session, false)
            .await
            .expect("renew the session");
        assert!(
            matches!(renewed, SessionRenewal::KeepRunning { .. }),
            "the session lives while it is renewed: {renewed:?}"
        );
    }
    let before = rows_read(&admin, &schema).await;
    assert!(
        before.values().sum::<i64>() > 0,
        "PostgreSQL counts the rows read (track_counts is on)"
    );
    for _ in 0..PASSES {
        assert_eq!(store.reap_expired_leases().await.expect("reap"), 0);
        assert_eq!(store.relay_due_jobs(&queue, 500).await.expect("relay"), 0);
        assert_eq!(store.cleanup_expired().await.expect("sweep"), 0);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(STATISTICS_REPORTED).await;
    let read = since(&before, &rows_read(&admin, &schema).await);
    let at_rest = QUEUED + DELAYED + PARKED + RUNNING;
    assert!(
        read.values().sum::<i64>() < PASSES as i64 * 10,
        "{PASSES} passes of the reaper, relay and sweeper read these rows with {at_rest} \
         tasks at rest, so they read tasks that are not due: {read:?}"
    );
}
