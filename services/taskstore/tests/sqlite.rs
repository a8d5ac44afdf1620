//! The SQLite file: durable across restarts, migrated when older, refused
//! (and left untouched) when newer or not a database at all.

mod common;

use std::time::Duration;

use taskstore::domain::{
    DispatchRequest, JsonObject, NewResult, NewTask, RequestId, ResultStatus, Scope, TaskStatus,
    ToolName,
};
use taskstore::store::execution::{
    DispatchStore, ExecutionStore, JobPublisher, PublishError, Published, publish_each,
};
use taskstore::store::sqlite::{self, OpenError};
use taskstore::store::{StoreConfig, TaskStore};
use taskstore_proto::jobs::JobMessage;

fn task(dispatch: bool) -> NewTask {
    NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: Default::default(),
        poll_interval: None,
        request_id: RequestId::parse("1").expect("id"),
        request: JsonObject::parse(r#"{"method":"tools/call","params":{"name":"echo"}}"#)
            .expect("json"),
        dispatch: dispatch.then(|| DispatchRequest {
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

struct Queue;

#[async_trait::async_trait]
impl JobPublisher for Queue {
    async fn publish(&self, _job: &JobMessage) -> Result<Published, PublishError> {
        Ok(Published::Queued)
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }
}

fn digest(path: &std::path::Path) -> Vec<u8> {
    std::fs::read(path).expect("read the file")
}

#[tokio::test]
async fn tasks_results_and_jobs_survive_a_restart() {
    let path = common::sqlite_path();
    let scope = Scope::tenant_wide();
    let (finished, waiting, page_cursor) = {
        let store = sqlite::open(&path, StoreConfig::default())
            .await
            .expect("open");
        let finished = store
            .create_task(&scope, task(false))
            .await
            .expect("create")
            .task_id;
        let result = NewResult {
            status: ResultStatus::Completed,
            result: JsonObject::parse(r#"{"content":[{"type":"text","text":"kept"}]}"#)
                .expect("json"),
            message: Some("done".into()),
            lease: None,
        };
        store
            .store_result(&scope, &finished, result)
            .await
            .expect("store");
        let waiting = store
            .create_task(&scope, task(true))
            .await
            .expect("create")
            .task_id;
        // The job went to an in-process queue that dies with the process.
        assert_eq!(store.relay_due_jobs(&Queue, 10).await.expect("relay"), 1);
        let page = store
            .list_tasks(
                &scope,
                taskstore::domain::PageRequest {
                    cursor: None,
                    page_size: Some(1),
                    ..Default::default()
                },
            )
            .await
            .expect("list");
        (finished, waiting, page.next_cursor.expect("a second page"))
    };

    let store = sqlite::open(&path, StoreConfig::default())
        .await
        .expect("reopen");
    let result = store
        .get_result(&scope, &finished)
        .await
        .expect("the result survived");
    assert_eq!(
        result.result.as_str(),
        r#"{"content":[{"type":"text","text":"kept"}]}"#
    );
    assert_eq!(result.task.status_message.as_deref(), Some("done"));
    assert_eq!(
        store.get_task(&scope, &waiting).await.expect("get").status,
        TaskStatus::Working
    );
    // Its job is back, so a worker will run it.
    assert_eq!(store.relay_due_jobs(&Queue, 10).await.expect("relay"), 1);
    let claim = store
        .claim(
            &taskstore::domain::TenantId::default_tenant(),
            &waiting,
            1,
            "after-restart",
        )
        .await
        .expect("claimable after the restart");
    assert_eq!(claim.attempt, 1);
    // Cursors survive too (the key is kept in the file).
    let rest = store
        .list_tasks(
            &scope,
            taskstore::domain::PageRequest {
                cursor: Some(page_cursor),
                page_size: Some(10),
                ..Default::default()
            },
        )
        .await
        .expect("an old cursor still works");
    assert_eq!(rest.tasks.len(), 1);
}

#[tokio::test]
async fn the_attempt_history_survives_a_restart() {
    use taskstore::domain::{AttemptEnd, AttemptOutcome, ReleaseReason, TenantId};
    use taskstore::store::TaskInsights;
    let path = common::sqlite_path();
    let tenant = TenantId::default_tenant();
    let id = {
        let store = sqlite::open(&path, StoreConfig::default())
            .await
            .expect("open");
        let id = store
            .create_task(&Scope::tenant_wide(), task(true))
            .await
            .expect("create")
            .task_id;
        let claim = store.claim(&tenant, &id, 1, "w-1").await.expect("claim");
        store
            .release(
                &tenant,
                &id,
                &claim.lease_token,
                ReleaseReason::RetryableError,
                "flaky",
            )
            .await
            .expect("release");
        store.claim(&tenant, &id, 2, "w-2").await.expect("claim");
        id
    };
    let store = sqlite::open(&path, StoreConfig::default())
        .await
        .expect("reopen");
    let details = store.task_details(&tenant, &id).await.expect("details");
    let kept: Vec<_> = details
        .attempts
        .iter()
        .map(|r| (r.attempt, r.worker.as_str(), r.end.clone()))
        .collect();
    let flaky = AttemptEnd::RetryableFailure {
        error: "flaky".into(),
    };
    assert_eq!(
        kept,
        [
            (1, "w-1", Some(AttemptOutcome::WithoutResult(flaky))),
            (2, "w-2", None)
        ]
    );
}

#[tokio::test]
async fn an_older_file_is_migrated_and_keeps_its_tasks() {
    let path = common::sqlite_path();
    // An "old version": only the first migration, with a task in it.
    let old = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("old-migrations-{}", std::process::id()));
    std::fs::create_dir_all(&old).expect("dir");
    let first = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../migrations/sqlite/0001_tasks.sql");
    std::fs::copy(&first, old.join("0001_tasks.sql")).expect("copy the first migration");
    {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true);
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("pool");
        sqlx::migrate::Migrator::new(old.as_path())
            .await
            .expect("old migrator")
            .run(&pool)
            .await
            .expect("old schema");
        let store_at_v1 = r#"{"tenant":"default","task_id":"from-v1","status":"completed","status_message":null,"created_at_us":1700000000000000,"last_updated_at_us":1700000000000001,"ttl_ms":null,"poll_interval_ms":1000,"session_id":null,"expires_at_us":null,"request_id":"1","request":"{}","result":"{\"content\":[]}","dispatch":null}"#;
        sqlx::query(
            "INSERT INTO tasks (tenant_id, task_id, record) VALUES ('default', 'from-v1', ?)",
        )
        .bind(store_at_v1)
        .execute(&pool)
        .await
        .expect("insert");
        pool.close().await;
    }
    let store = sqlite::open(&path, StoreConfig::default())
        .await
        .expect("the old file opens");
    let id = taskstore::domain::TaskId::parse("from-v1").expect("id");
    let result = store
        .get_result(&Scope::tenant_wide(), &id)
        .await
        .expect("the old task is there");
    assert_eq!(result.task.status, TaskStatus::Completed);
    // The newer schema (the outbox) works.
    store
        .create_task(&Scope::tenant_wide(), task(true))
        .await
        .expect("dispatch needs migration 2");
    let _ = std::fs::remove_dir_all(&old);
}

#[tokio::test]
async fn a_file_from_a_newer_version_is_refused_untouched() {
    let path = common::sqlite_path();
    drop(
        sqlite::open(&path, StoreConfig::default())
            .await
            .expect("create"),
    );
    {
        let options = sqlx::sqlite::SqliteConnectOptions::new().filename(&path);
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .expect("pool");
        sqlx::query(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time)
             VALUES (99990101000000, 'from the future', 1, x'00', 0)",
        )
        .execute(&pool)
        .await
        .expect("a future migration");
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .execute(&pool)
            .await
            .expect("checkpoint");
        pool.close().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    let before = digest(&path);
    match sqlite::open(&path, StoreConfig::default()).await {
        Err(err @ OpenError::FromTheFuture { .. }) => {
            assert!(err.to_string().contains("newer taskstore"), "{err}");
        }
        other => panic!("expected FromTheFuture, got {:?}", other.map(|_| ())),
    }
    assert_eq!(digest(&path), before, "the file was not modified");
}

#[tokio::test]
async fn a_corrupt_file_is_refused_untouched() {
    let path = common::sqlite_path();
    std::fs::write(
        &path,
        b"this is not a database, just some words that fill the header",
    )
    .expect("write");
    let before = digest(&path);
    match sqlite::open(&path, StoreConfig::default()).await {
        Err(err @ OpenError::Corrupt { .. }) => assert!(
            err.to_string().contains("not a taskstore data file"),
            "{err}"
        ),
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
    assert_eq!(digest(&path), before, "the file was not modified");

    // A real SQLite header over garbage: refused as well.
    let mut forged = b"SQLite format 3\0".to_vec();
    forged.extend(std::iter::repeat_n(0xA5u8, 4096));
    std::fs::write(&path, &forged).expect("write");
    assert!(matches!(
        sqlite::open(&path, StoreConfig::default()).await,
        Err(OpenError::Corrupt { .. })
    ));
    assert_eq!(digest(&path), forged, "the file was not modified");
}

/// The key store: PostgreSQL and SQLite run the same statements
/// (`store/keys/sql.rs`); both keep, find, list, revoke and record keys,
/// and end dashboard sessions, as the in-memory one does.
#[tokio::test]
async fn the_key_stores_keep_keys_and_ended_sessions_alike() {
    use taskstore::domain::{Reach, Role, TenantId};
    use taskstore::store::keys::{KeyStore, MemoryKeys, PgKeys, StoredKey};

    let path = common::sqlite_path();
    sqlite::open(&path, StoreConfig::default())
        .await
        .expect("the file, migrated");
    let stores: Vec<(&str, Box<dyn KeyStore>)> = vec![
        ("memory", Box::new(MemoryKeys::default())),
        ("sqlite", Box::new(sqlite::keys(&path).await.expect("keys"))),
        (
            "postgres",
            Box::new(PgKeys::new(common::migrated_pool().await)),
        ),
    ];
    // An hour ago, in whole seconds (what every database keeps exactly).
    let created_at =
        chrono::DateTime::from_timestamp(chrono::Utc::now().timestamp() - 3600, 0).expect("time");
    let key = |id: &str, reach: Reach| StoredKey {
        key_id: id.to_owned(),
        secret_sha256: [7; 32],
        reach,
        role: Role::Client,
        name: format!("key {id}"),
        created_at,
        revoked_at: None,
        last_used_at: None,
    };
    let tenant = Reach::Tenant(TenantId::parse("acme").expect("tenant"));
    for (name, store) in stores {
        store
            .insert_key(&key("b", Reach::AllTenants))
            .await
            .expect(name);
        store
            .insert_key(&key("a", tenant.clone()))
            .await
            .expect(name);
        assert!(
            store
                .insert_key(&key("a", Reach::AllTenants))
                .await
                .is_err(),
            "{name}: a key id is unique"
        );
        let found = store.find_key("a").await.expect(name);
        assert_eq!(found, Some(key("a", tenant.clone())), "{name}");
        assert_eq!(store.find_key("nope").await.expect(name), None, "{name}");
        let listed: Vec<_> = store
            .list_keys()
            .await
            .expect(name)
            .into_iter()
            .map(|k| k.key_id)
            .collect();
        assert_eq!(listed, ["a", "b"], "{name}: oldest first, then by id");

        store.record_use("a").await.expect(name);
        let used = store.find_key("a").await.expect(name).expect("kept");
        assert!(
            used.last_used_at.is_some_and(|at| at > created_at),
            "{name}"
        );
        assert!(store.revoke_key("a").await.expect(name), "{name}");
        assert!(!store.revoke_key("a").await.expect(name), "{name}: once");
        assert!(!store.revoke_key("nope").await.expect(name), "{name}");
        let revoked = store.find_key("a").await.expect(name).expect("kept");
        assert!(revoked.revoked_at.is_some(), "{name}");

        let until = chrono::Utc::now() + chrono::Duration::hours(1);
        assert!(!store.session_ended("s1").await.expect(name), "{name}");
        store.end_session("s1", until).await.expect(name);
        store.end_session("s1", until).await.expect(name);
        assert!(store.session_ended("s1").await.expect(name), "{name}");
        assert!(!store.session_ended("s2").await.expect(name), "{name}");
    }
}

/// A worker's claim held when the process died is on file; after the
/// restart the reaper finds it (the memory store's reaper reads only the
/// tasks that may hold a lease, a set rebuilt from the file on open) and
/// the task is dispatched again.
#[tokio::test]
async fn a_claim_held_at_a_crash_is_reaped_after_the_restart() {
    let path = common::sqlite_path();
    let scope = Scope::tenant_wide();
    let mut config = StoreConfig::default();
    // The shortest lease the configuration takes.
    config.execution.lease_duration = Duration::from_secs(1);
    let claimed = {
        let store = sqlite::open(&path, config.clone()).await.expect("open");
        let claimed = store
            .create_task(&scope, task(true))
            .await
            .expect("create")
            .task_id;
        assert_eq!(store.relay_due_jobs(&Queue, 10).await.expect("relay"), 1);
        store
            .claim(
                &taskstore::domain::TenantId::default_tenant(),
                &claimed,
                1,
                "died-with-the-process",
            )
            .await
            .expect("claim");
        claimed
        // Dropped without releasing: the lease stays on file.
    };

    let store = sqlite::open(&path, config).await.expect("reopen");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(
        store.reap_expired_leases().await.expect("reap"),
        1,
        "the lease held at the crash is found"
    );
    // Dispatched again: its new job goes out and a worker claims attempt 2.
    assert_eq!(store.relay_due_jobs(&Queue, 10).await.expect("relay"), 1);
    let claim = store
        .claim(
            &taskstore::domain::TenantId::default_tenant(),
            &claimed,
            2,
            "after-restart",
        )
        .await
        .expect("claimable again");
    assert_eq!(claim.attempt, 2);
}
