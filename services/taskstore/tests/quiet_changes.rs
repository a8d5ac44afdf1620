//! Migration 0015: task changes are notified only where another replica
//! listens. A replica whose tenants nobody else follows claims and finishes
//! tasks without a notification, and tells its own subscribers in process;
//! once another replica follows the tenant, the same changes are notified
//! and reach it; a listener of an older version (one that does not
//! register) makes every change notified.

mod common;

use std::time::Duration;

use sqlx::Executor;
use sqlx::postgres::PgListener;
use taskstore::domain::{
    DispatchRequest, JsonObject, NewResult, NewTask, RequestId, ResultStatus, Scope, TaskId,
    TaskStatus, TenantId, ToolName,
};
use taskstore::store::execution::ExecutionStore;
use taskstore::store::postgres::PgTaskStore;
use taskstore::store::{Followed, StoreConfig, TaskFollow, TaskStore};
use tokio_stream::StreamExt;

const CHANNEL: &str = "taskstore_task_changed";

fn all() -> Scope {
    Scope::tenant_wide()
}

/// Databases of this test file start so; ones a crashed run left behind
/// are dropped once they are an hour old.
const DATABASE_PREFIX: &str = "tsquiet_";

/// A migrated database of the test's own: replicas look for older
/// listeners database-wide, so a test schema beside other tests' would see
/// theirs. `drop_database` removes it.
async fn own_database() -> (sqlx::PgPool, String) {
    let admin = common::admin_pool().await;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let stale: Vec<String> = sqlx::query_scalar(
        "SELECT datname::text FROM pg_database WHERE datname LIKE 'tsquiet\\_%'",
    )
    .fetch_all(&admin)
    .await
    .expect("list databases");
    for name in stale {
        let created = name
            .strip_prefix(DATABASE_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|created| created + 3600 < now) {
            let _ = admin
                .execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                .await;
        }
    }
    let mut suffix = [0u8; 6];
    getrandom::getrandom(&mut suffix).expect("os randomness");
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("{DATABASE_PREFIX}{now}_{suffix}");
    admin
        .execute(format!("CREATE DATABASE {name}").as_str())
        .await
        .expect("create database");
    let options = admin.connect_options().as_ref().clone().database(&name);
    let pool = taskstore::store::postgres::lazy_pool(options, common::test_pool_settings());
    taskstore::store::postgres::migrate(&pool)
        .await
        .expect("migrations apply");
    (pool, name)
}

async fn drop_database(pool: sqlx::PgPool, name: &str) {
    pool.close().await;
    common::admin_pool()
        .await
        .execute(format!("DROP DATABASE {name} WITH (FORCE)").as_str())
        .await
        .expect("drop database");
}

/// A raw listener on the task-change channel. `named`: under this
/// version's application name, as a replica's listener is; unnamed, it
/// looks like an older version's.
async fn raw_listener(pool: &sqlx::PgPool, named: bool) -> PgListener {
    let mut listener = PgListener::connect_with(pool).await.expect("listener");
    if named {
        listener
            .execute("SET application_name = 'taskstore change feed'")
            .await
            .expect("name");
    }
    listener.listen(CHANNEL).await.expect("listen");
    listener
}

/// The notifications about `task` that arrive within a moment (the
/// channel is shared by every test schema in the database).
async fn notified_about(listener: &mut PgListener, task: &TaskId) -> Vec<String> {
    let mut heard = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while let Ok(received) = tokio::time::timeout_at(deadline, listener.recv()).await {
        let payload = received.expect("listener").payload().to_owned();
        if payload.split(' ').nth(1) == Some(task.as_str()) {
            heard.push(payload);
        }
    }
    heard
}

/// A task dispatched to the `echo` tool.
fn echo_task() -> NewTask {
    NewTask {
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
            start: None,
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts: None,
        }),
        trace_context: None,
    }
}

/// Creates, claims and completes a dispatched task on `store`.
async fn run_task(store: &PgTaskStore) -> TaskId {
    let task = echo_task();
    let id = store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id;
    let claim = store
        .claim(&TenantId::default_tenant(), &id, 1, "w1")
        .await
        .expect("claim");
    store
        .store_result(
            &all(),
            &id,
            NewResult {
                status: ResultStatus::Completed,
                result: JsonObject::parse(r#"{"content":[]}"#).expect("json"),
                message: None,
                lease: Some(claim.lease_token),
            },
        )
        .await
        .expect("store");
    id
}

/// The statuses and messages `follow` shows for `task` within a while, up
/// to its completion.
async fn followed_until_done(follow: &mut TaskFollow, task: &TaskId) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let item = tokio::time::timeout(Duration::from_secs(5), follow.next())
            .await
            .expect("a change within 5 s")
            .expect("the follow goes on");
        let Followed::Changed(changed) = item else {
            continue;
        };
        if &changed.task.task_id != task {
            continue;
        }
        seen.push(format!(
            "{} {}",
            changed.task.status,
            changed.task.status_message.clone().unwrap_or_default()
        ));
        if changed.task.status == TaskStatus::Completed {
            return seen;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn changes_are_notified_only_when_another_replica_follows_the_tenant() {
    let (pool, database) = own_database().await;
    let mut raw = raw_listener(&pool, true).await;
    let here = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    assert!(
        here.quiet_changes_allowed(),
        "no older listener is connected"
    );
    let mut follow_here = here.follow_tasks(&all()).await.expect("follow");

    let alone = run_task(&here).await;
    assert_eq!(
        followed_until_done(&mut follow_here, &alone).await,
        ["working running on w1 (attempt 1 of 3)", "completed "],
        "this replica's follower hears the claim and the result in process"
    );
    assert_eq!(
        notified_about(&mut raw, &alone).await,
        Vec::<String>::new(),
        "nobody else follows the tenant: no notification"
    );

    let there = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let mut follow_there = there.follow_tasks(&all()).await.expect("follow");
    let heard = run_task(&here).await;
    assert_eq!(
        followed_until_done(&mut follow_there, &heard).await,
        ["working running on w1 (attempt 1 of 3)", "completed "],
        "the other replica hears both changes"
    );
    assert_eq!(
        followed_until_done(&mut follow_here, &heard).await,
        ["working running on w1 (attempt 1 of 3)", "completed "],
        "and this one hears each once"
    );
    assert_eq!(notified_about(&mut raw, &heard).await.len(), 2);

    // The other replica shuts down: it deletes its registrations, and this
    // one is quiet again at once (not only once they would have lapsed).
    there.leave().await;
    let after = run_task(&here).await;
    assert_eq!(notified_about(&mut raw, &after).await, Vec::<String>::new());
    assert_eq!(followed_until_done(&mut follow_here, &after).await.len(), 2);
    drop((raw, here, there, follow_here, follow_there));
    drop_database(pool, &database).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_older_versions_listener_makes_every_change_notified() {
    let (pool, database) = own_database().await;
    let named = raw_listener(&pool, true).await;
    let store = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    assert!(
        !store
            .older_change_listeners_connected()
            .await
            .expect("check"),
        "a listener under this version's name is not an older one"
    );
    let mut older = raw_listener(&pool, false).await;
    assert!(
        store
            .older_change_listeners_connected()
            .await
            .expect("check"),
        "an unnamed listener may be an older replica's"
    );
    drop(named);
    // A replica opened while it listens notifies from its first change.
    let replica = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    assert!(!replica.quiet_changes_allowed());
    let id = run_task(&replica).await;
    assert_eq!(notified_about(&mut older, &id).await.len(), 2);
    drop((older, store, replica));
    drop_database(pool, &database).await;
}

/// The notification of a result carries it (when it fits): a call waiting
/// on another replica answers without reading the row. Here that replica
/// has no connection left to read with once its call waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_result_stored_on_another_replica_reaches_a_waiting_call_without_a_read() {
    let (pool, database) = own_database().await;
    let here = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let options = pool.connect_options().as_ref().clone();
    // Two connections: the listener's, and one for the waiting call's
    // first read (and its registration).
    let scarce = taskstore::store::postgres::lazy_pool(
        options,
        taskstore::store::postgres::PoolSettings {
            max_connections: 2,
            acquire_timeout: Duration::from_secs(10),
        },
    );
    let there = PgTaskStore::open(scarce.clone(), StoreConfig::default())
        .await
        .expect("open");
    let task = echo_task();
    let id = here
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id;
    let waiter = {
        let (there, id) = (there.clone(), id.clone());
        tokio::spawn(async move {
            there
                .wait_for_result(&all(), &id, Duration::from_secs(60))
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _last_connection = scarce.acquire().await.expect("the free connection");
    let claim = here
        .claim(&TenantId::default_tenant(), &id, 1, "w1")
        .await
        .expect("claim");
    here.store_result(
        &all(),
        &id,
        NewResult {
            status: ResultStatus::Completed,
            result: JsonObject::parse(r#"{"content":[{"type":"text","text":"done"}]}"#)
                .expect("json"),
            message: None,
            lease: Some(claim.lease_token),
        },
    )
    .await
    .expect("store");
    let answered = tokio::time::timeout(Duration::from_secs(3), waiter)
        .await
        .expect("answered from the notification, without waiting for a connection")
        .expect("waiter")
        .expect("result");
    assert_eq!(answered.task.status, TaskStatus::Completed);
    assert_eq!(
        answered.result.as_str(),
        r#"{"content":[{"type":"text","text":"done"}]}"#
    );
    drop((_last_connection, here, there));
    scarce.close().await;
    drop_database(pool, &database).await;
}

/// A session holding `change_listeners` (a `pg_dump`, an operator's open
/// transaction) does not hold back a registration, nor every claim queued
/// behind it: after a second the rows are written without the lock, and
/// the tenant's subscribers are told to read again a second later.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_holding_the_registrations_delays_a_registration_by_a_second_at_most() {
    let (pool, database) = own_database().await;
    #[allow(clippy::disallowed_methods)] // a test's own transaction, never cancelled
    let mut holder = pool.begin().await.expect("begin");
    holder
        .execute("SELECT count(*) FROM change_listeners")
        .await
        .expect("read the table");
    let store = PgTaskStore::open(pool.clone(), StoreConfig::default())
        .await
        .expect("open");
    let started = std::time::Instant::now();
    let mut follow = tokio::time::timeout(Duration::from_secs(5), store.follow_tasks(&all()))
        .await
        .expect("registered without waiting for the holder")
        .expect("follow");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "it waited for the lock first"
    );
    let registered: i64 = sqlx::query_scalar("SELECT count(*) FROM change_listeners")
        .fetch_one(&mut *holder)
        .await
        .expect("count");
    assert_eq!(registered, 1);
    let item = tokio::time::timeout(Duration::from_secs(5), follow.next())
        .await
        .expect("a resync within 5 s")
        .expect("the follow goes on");
    assert_eq!(item, Followed::Resync);
    holder.rollback().await.expect("rollback");
    drop((follow, store));
    drop_database(pool, &database).await;
}
