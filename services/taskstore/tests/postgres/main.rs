//! PostgreSQL-specific behaviour that the traits cannot express: identical
//! timestamps, and several replicas on one database at once (migrating,
//! sharing cursors, waking each other's waiters, relaying the same outbox).

#[path = "../common/mod.rs"]
mod common;

mod at_rest;
mod cancelled;
mod progress;
mod schemas;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use common::recorder::SharedRecorder;
use taskstore::StoreError;
use taskstore::domain::{
    DispatchRequest, JsonObject, LeaseToken, NewResult, NewTask, PageRequest, RequestId,
    ResultStatus, Scope, TaskId, TaskStatus, TenantId, ToolName,
};
use taskstore::store::execution::{DispatchStore, ExecutionStore};
use taskstore::store::postgres::{self, PgTaskStore};
use taskstore::store::{StoreConfig, TaskStore};

fn all() -> Scope {
    Scope::tenant_wide()
}

async fn dispatched(store: &PgTaskStore) -> TaskId {
    dispatched_with(store, &ToolName::parse("echo").expect("tool"), None).await
}

/// A task dispatched to `tool`, starting at `start` (`None`: at once).
async fn dispatched_with(
    store: &PgTaskStore,
    tool: &ToolName,
    start: Option<taskstore::domain::StartTime>,
) -> TaskId {
    let task = NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: Default::default(),
        poll_interval: None,
        request_id: RequestId::parse("1").expect("id"),
        request: JsonObject::parse(r#"{"method":"tools/call","params":{"name":"echo"}}"#)
            .expect("json"),
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start,
            tool: tool.clone(),
            max_attempts: None,
        }),
        trace_context: None,
    };
    store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id
}

fn result(lease: &LeaseToken) -> NewResult {
    NewResult {
        status: ResultStatus::Completed,
        result: JsonObject::parse(r#"{"content":[]}"#).expect("json"),
        message: None,
        lease: Some(lease.clone()),
    }
}

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
            "api_keys",
            "change_listeners",
            "dashboard_ended_sessions",
            "dispatch_outbox",
            "dispatch_pauses",
            "dispatch_slots",
            "dispatch_starts",
            "store_secrets",
            "task_input_requests",
            "tasks",
            "worker_sessions",
            "workers"
        ]
    );
}

/// Fifty tasks `same-001` … `same-050` committed with one timestamp, as a
/// batch insert would.
async fn insert_fifty_tasks_sharing_a_timestamp(store: &PgTaskStore) {
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
}

#[tokio::test]
async fn tasks_sharing_a_timestamp_page_without_gaps_or_duplicates() {
    let store = common::pg_store(StoreConfig::default()).await;
    insert_fifty_tasks_sharing_a_timestamp(&store).await;

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
                    ..Default::default()
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
                ..Default::default()
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
                ..Default::default()
            },
        )
        .await
        .expect("a cursor from one replica works on another");
    assert_eq!(rest.tasks.len(), 2);
}

fn common_task() -> taskstore::domain::NewTask {
    taskstore::domain::NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: Default::default(),
        poll_interval: None,
        request_id: taskstore::domain::RequestId::parse("\"r\"").expect("id"),
        request: taskstore::domain::JsonObject::parse("{}").expect("json"),
        dispatch: None,
        trace_context: None,
    }
}

#[tokio::test]
async fn a_result_stored_on_one_replica_wakes_a_waiter_on_another() {
    let pool = common::migrated_pool().await;
    let replica_a = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let (options, _) = (pool.connect_options().as_ref().clone(), ());
    let other_pool = taskstore::store::postgres::lazy_pool(options, common::test_pool_settings());
    let replica_b = PgTaskStore::open(other_pool, StoreConfig::default())
        .await
        .expect("open");
    let id = dispatched(&replica_a).await;
    let waiter = {
        let (replica_b, id) = (replica_b.clone(), id.clone());
        tokio::spawn(async move {
            replica_b
                .wait_for_result(&all(), &id, Duration::from_secs(60))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let claim = replica_a
        .claim(&TenantId::default_tenant(), &id, 1, "w")
        .await
        .expect("claim");
    replica_a
        .store_result(&all(), &id, result(&claim.lease_token))
        .await
        .expect("store");
    let woken = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("woken by NOTIFY, not by polling");
    assert_eq!(
        woken.expect("waiter").expect("result").task.status,
        TaskStatus::Completed
    );
}

/// The jobs of a replica that crashed before publishing them fall due at the
/// end of their grace; the replicas still running then publish each once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_relaying_at_once_publish_each_job_once() {
    let pool = common::migrated_pool().await;
    let crashed = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    for _ in 0..60 {
        dispatched(&crashed).await;
    }
    drop(crashed);
    let replicas: Vec<_> =
        open_all((0..3).map(|_| PgTaskStore::open(pool.clone(), StoreConfig::default()))).await;
    assert_eq!(
        replicas[0]
            .relay_due_jobs(&SharedRecorder::routable(), 100)
            .await
            .expect("relay"),
        0,
        "within their grace, the jobs are their replica's"
    );
    // The grace is over.
    sqlx::query("UPDATE dispatch_outbox SET available_at = now()")
        .execute(&pool)
        .await
        .expect("due");
    let queue = SharedRecorder::routable();
    let mut relays = tokio::task::JoinSet::new();
    for replica in replicas {
        let queue = queue.clone();
        relays.spawn(async move {
            let mut published = 0;
            loop {
                let batch = replica.relay_due_jobs(&queue, 7).await.expect("relay");
                published += batch;
                if batch == 0 {
                    return published;
                }
            }
        });
    }
    let total: u64 = relays.join_all().await.into_iter().sum();
    assert_eq!(total, 60);
    let mut published: Vec<_> = queue
        .0
        .jobs
        .lock()
        .expect("lock")
        .iter()
        .map(|j| j.task_id.clone())
        .collect();
    published.sort();
    published.dedup();
    assert_eq!(published.len(), 60, "every job once, none twice");
}

async fn open_all<F: std::future::Future<Output = Result<PgTaskStore, StoreError>>>(
    opens: impl Iterator<Item = F>,
) -> Vec<PgTaskStore> {
    let mut stores = Vec::new();
    for open in opens {
        stores.push(open.await.expect("open"));
    }
    stores
}

/// Migration 0008: a replica's relay is not woken by another replica's jobs
/// (no notification); it takes them when it polls after their grace. That
/// is how the jobs of a replica that crashed after its commit, or cannot
/// reach the broker, still reach the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_replicas_jobs_are_relayed_when_this_replica_polls() {
    let pool = common::migrated_pool().await;
    let writer = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let relaying = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let queue = SharedRecorder::routable();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let poll = Duration::from_secs(1);
    let relay = taskstore::dispatch::relay::spawn(
        Arc::new(relaying),
        queue.connect(),
        poll,
        taskstore::health::QueueHealth::default(),
        shutdown.clone(),
    );
    // The relay's first pass (at once, finding nothing) is over well before
    // its next poll.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let id = dispatched(&writer).await;
    let published = || queue.0.jobs.lock().expect("lock").len();

    let created = tokio::time::Instant::now();
    tokio::time::sleep(taskstore::store::postgres::HANDOFF_GRACE - poll * 2).await;
    assert_eq!(
        published(),
        0,
        "published within its grace (woken by another replica's job, or polled early)"
    );
    let deadline = created + taskstore::store::postgres::HANDOFF_GRACE + poll * 2;
    while published() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "another replica's job was not relayed at the first poll after its grace"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        queue.0.jobs.lock().expect("lock")[0].task_id,
        id.to_string()
    );
    shutdown.cancel();
    relay.await.expect("relay stops");
}

/// Every task `search` finds on `store`'s default tenant, 7 at a time.
async fn search_all(store: &PgTaskStore, search: &taskstore::domain::TaskSearch) -> Vec<String> {
    use taskstore::domain::SearchPage;
    use taskstore::store::TaskInsights;

    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .insights()
            .search_tasks(
                &TenantId::default_tenant(),
                search,
                &SearchPage::new(Some(7), after),
            )
            .await
            .expect("search");
        assert!(!page.truncated);
        seen.extend(page.tasks.into_iter().map(|t| t.task_id.to_string()));
        match page.next {
            Some(next) => after = Some(next),
            None => return seen,
        }
    }
}

#[tokio::test]
async fn searches_page_through_tasks_sharing_a_timestamp() {
    use taskstore::domain::{IdPrefix, TaskSearch};

    let store = common::pg_store(StoreConfig::default()).await;
    insert_fifty_tasks_sharing_a_timestamp(&store).await;
    let named = |numbers: &mut dyn Iterator<Item = u32>| -> Vec<String> {
        numbers.map(|i| format!("same-{i:03}")).collect()
    };
    assert_eq!(
        search_all(&store, &TaskSearch::default()).await,
        named(&mut (1..=50).rev()),
        "newest first: by id, descending, each once"
    );
    let the_forties = TaskSearch {
        id_prefix: Some(IdPrefix::parse("same-04").expect("prefix")),
        ..TaskSearch::default()
    };
    assert_eq!(
        search_all(&store, &the_forties).await,
        named(&mut (40..=49).rev())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboard_reads_are_cut_off_and_never_starve_the_api() {
    use taskstore::store::TaskInsights;
    use taskstore::store::postgres::{INSIGHTS_CONNECTIONS, INSIGHTS_STATEMENT_TIMEOUT};

    let store = common::pg_store(StoreConfig::default()).await;
    let task = store
        .create_task(&all(), common_task())
        .await
        .expect("create");
    // Questions locked away: a dashboard read of them waits, as a costly
    // one would run, until its statement timeout stops it.
    #[allow(clippy::disallowed_methods)] // a test's own transaction, never cancelled
    let mut locker = store.pool().begin().await.expect("begin");
    sqlx::query("LOCK TABLE task_input_requests IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *locker)
        .await
        .expect("lock");
    let started = tokio::time::Instant::now();
    let mut reads = tokio::task::JoinSet::new();
    for _ in 0..=INSIGHTS_CONNECTIONS {
        let store = store.clone();
        reads.spawn(async move {
            store
                .insights()
                .waiting_questions(&TenantId::default_tenant(), 10)
                .await
        });
    }
    // Every dashboard connection is taken, one more read waits for one:
    // the API answers at once all the same.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let api = tokio::time::timeout(
        Duration::from_millis(500),
        store.get_task(&all(), &task.task_id),
    )
    .await
    .expect("the API is not starved")
    .expect("get");
    assert_eq!(api.task_id, task.task_id);
    let outcomes = reads.join_all().await;
    let elapsed = started.elapsed();
    assert!(elapsed >= INSIGHTS_STATEMENT_TIMEOUT, "{elapsed:?}");
    assert!(elapsed < INSIGHTS_STATEMENT_TIMEOUT * 3, "{elapsed:?}");
    for outcome in &outcomes {
        assert!(
            matches!(outcome, Err(StoreError::Unavailable(_))),
            "UNAVAILABLE, not INTERNAL: {outcome:?}"
        );
    }
    assert!(
        outcomes.iter().any(|o| {
            o.as_ref()
                .is_err_and(|e| e.to_string().contains("took too long"))
        }),
        "{outcomes:?}"
    );
    locker.rollback().await.expect("unlock");
    let waiting = store
        .insights()
        .waiting_questions(&TenantId::default_tenant(), 10)
        .await
        .expect("the dashboard reads again");
    assert!(waiting.is_empty());
    // Its reads are planned with their values whatever the table's size
    // (store/postgres/insights.rs).
    let mode: String = sqlx::query_scalar("SHOW plan_cache_mode")
        .fetch_one(store.insights().pool())
        .await
        .expect("show");
    assert_eq!(mode, "force_custom_plan");
}
