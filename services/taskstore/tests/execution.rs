//! The execution protocol, written once and run against every backend
//! (PostgreSQL and in-memory): claims, fenced reports, lease expiry,
//! retries, poison tasks, cancellation, and the outbox relay (with a
//! recording publisher; the RabbitMQ publisher is exercised end to end in
//! the worker's tests). Only public APIs: leases expire by waiting.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use taskstore::StoreError;
use taskstore::domain::{
    DispatchRequest, ExecutionPolicy, JsonObject, LeaseToken, NewResult, NewTask, ReleaseOutcome,
    ReleaseReason, Renewal, RequestId, ResultStatus, Scope, StatusUpdate, TaskId, TaskStatus,
    TenantId, ToolName,
};
use taskstore::store::execution::{
    ExecutionStore, JobPublisher, PublishError, Published, publish_each,
};
use taskstore::store::postgres::PgTaskStore;
use taskstore::store::{StoreConfig, TaskStore};
use taskstore_proto::jobs::JobMessage;
use tokio_stream::StreamExt;

fn tenant() -> TenantId {
    TenantId::default_tenant()
}

fn all() -> Scope {
    Scope::tenant_wide()
}

/// A store with both sides of the contract.
trait ProtocolStore: TaskStore + ExecutionStore {}
impl<T: TaskStore + ExecutionStore> ProtocolStore for T {}

/// A way to open a fresh, empty store with an execution policy.
#[async_trait]
trait ExecBackend: Sync {
    async fn open(&self, policy: ExecutionPolicy) -> Arc<dyn ProtocolStore>;
}

struct Postgres;

#[async_trait]
impl ExecBackend for Postgres {
    async fn open(&self, policy: ExecutionPolicy) -> Arc<dyn ProtocolStore> {
        Arc::new(
            common::pg_store(StoreConfig {
                execution: policy,
                ..StoreConfig::default()
            })
            .await,
        )
    }
}

struct Sqlite;

#[async_trait]
impl ExecBackend for Sqlite {
    async fn open(&self, policy: ExecutionPolicy) -> Arc<dyn ProtocolStore> {
        Arc::new(
            common::sqlite_store(StoreConfig {
                execution: policy,
                ..StoreConfig::default()
            })
            .await,
        )
    }
}

struct Memory;

#[async_trait]
impl ExecBackend for Memory {
    async fn open(&self, policy: ExecutionPolicy) -> Arc<dyn ProtocolStore> {
        let config = StoreConfig {
            execution: policy,
            ..StoreConfig::default()
        };
        Arc::new(
            taskstore::store::memory::MemoryTaskStore::new(config, None).expect("memory store"),
        )
    }
}

macro_rules! execution_cases {
    ($backend:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                crate::$case(&$backend).await;
            }
        )*
    };
}

macro_rules! execution_suite {
    ($backend:expr) => {
        execution_cases!($backend;
            exactly_one_of_many_claims_wins,
            reports_are_fenced_by_the_lease,
            an_expired_lease_dispatches_again_and_fences_the_old_attempt,
            renewals_keep_a_long_task_alive,
            a_poison_task_fails_after_its_attempts,
            retryable_errors_back_off_then_fail_and_shutdown_gives_the_attempt_back,
            cancellation_reaches_the_running_attempt_at_once,
            the_relay_publishes_each_job_once_and_drops_stale_ones,
            a_job_for_an_unserved_tool_waits_and_says_so,
            the_execution_api_refuses_hostile_input_and_changes_nothing,
            the_relay_wakes_at_once_on_a_new_job,
        );
    };
}

mod postgres {
    execution_suite!(crate::Postgres);
}

mod memory {
    execution_suite!(crate::Memory);
}

mod sqlite {
    execution_suite!(crate::Sqlite);
}

/// Waits past the 1 s lease of [`short_leases`], as if the worker froze.
async fn let_leases_expire() {
    tokio::time::sleep(Duration::from_millis(1200)).await;
}

fn short_leases() -> ExecutionPolicy {
    ExecutionPolicy {
        lease_duration: Duration::from_secs(1),
        default_max_attempts: 3,
        backoff_base: Duration::from_millis(200),
        backoff_max: Duration::from_secs(1),
        ..ExecutionPolicy::default()
    }
}

async fn dispatched(store: &dyn ProtocolStore, max_attempts: Option<u32>) -> TaskId {
    let task = NewTask {
        task_id: None,
        ttl: None,
        request_id: RequestId::parse("1").expect("id"),
        request: JsonObject::parse(
            r#"{"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        )
        .expect("json"),
        dispatch: Some(DispatchRequest {
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts,
        }),
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

macro_rules! assert_err {
    ($result:expr, $pattern:pat) => {
        match $result {
            Err($pattern) => {}
            other => panic!("expected {}, got {other:?}", stringify!($pattern)),
        }
    };
}

async fn exactly_one_of_many_claims_wins(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let mut claims = tokio::task::JoinSet::new();
    for worker in 0..10 {
        let (store, id) = (store.clone(), id.clone());
        claims.spawn(async move {
            store
                .claim(&tenant(), &id, 1, &format!("worker-{worker}"))
                .await
        });
    }
    let outcomes = claims.join_all().await;
    let winners: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
    assert_eq!(winners.len(), 1, "{outcomes:?}");
    assert!(
        outcomes
            .iter()
            .filter(|o| o.is_err())
            .all(|o| matches!(o, Err(StoreError::FailedPrecondition(_))))
    );
    let claim = winners[0];
    assert_eq!(
        (claim.attempt, claim.max_attempts, claim.tool.as_str()),
        (1, 3, "echo")
    );
    assert!(claim.request.as_str().contains("\"hi\""));
    let task = store.get_task(&all(), &id).await.expect("get");
    assert!(
        task.status_message
            .as_deref()
            .is_some_and(|m| m.contains("attempt 1 of 3")),
        "{task:?}"
    );
    // A duplicate of the same job, or a job of another generation, is stale.
    assert_err!(
        store.claim(&tenant(), &id, 1, "late").await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store.claim(&tenant(), &id, 7, "stale").await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store
            .claim(&tenant(), &TaskId::parse("nope").expect("id"), 1, "w")
            .await,
        StoreError::NotFound
    );
}

async fn reports_are_fenced_by_the_lease(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let claim = store.claim(&tenant(), &id, 1, "w1").await.expect("claim");
    let forged = LeaseToken::parse("not-the-lease").expect("token");

    let progress = StatusUpdate {
        status: TaskStatus::InputRequired,
        message: Some("need a file".into()),
        lease: Some(claim.lease_token.clone()),
    };
    assert_eq!(
        store
            .update_status(&all(), &id, progress)
            .await
            .expect("fenced update")
            .status,
        TaskStatus::InputRequired
    );
    let forged_update = StatusUpdate {
        status: TaskStatus::Working,
        message: None,
        lease: Some(forged.clone()),
    };
    assert_err!(
        store.update_status(&all(), &id, forged_update).await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store.store_result(&all(), &id, result(&forged)).await,
        StoreError::FailedPrecondition(_)
    );
    assert_eq!(
        store
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::KeepRunning
    );
    assert!(matches!(
        store.renew(&tenant(), &id, &forged).await.expect("renew"),
        Renewal::Stop(_)
    ));

    store
        .store_result(&all(), &id, result(&claim.lease_token))
        .await
        .expect("the lease holder stores");
    assert_err!(
        store
            .store_result(&all(), &id, result(&claim.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert!(matches!(
        store
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop(_)
    ));
}

async fn an_expired_lease_dispatches_again_and_fences_the_old_attempt(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let first = store
        .claim(&tenant(), &id, 1, "frozen")
        .await
        .expect("claim");
    assert_eq!(
        store.reap_expired_leases().await.expect("reap"),
        0,
        "a live lease is left alone"
    );
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(store.reap_expired_leases().await.expect("reap"), 1);

    let message = store
        .get_task(&all(), &id)
        .await
        .expect("get")
        .status_message
        .unwrap_or_default();
    assert!(
        message.contains("frozen") && message.contains("dispatched again"),
        "{message}"
    );
    // The frozen worker wakes up: everything it says is refused.
    assert!(matches!(
        store
            .renew(&tenant(), &id, &first.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop(_)
    ));
    assert_err!(
        store
            .store_result(&all(), &id, result(&first.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    let second = store
        .claim(&tenant(), &id, 2, "healthy")
        .await
        .expect("claim again");
    assert_eq!(second.attempt, 2);
    store
        .store_result(&all(), &id, result(&second.lease_token))
        .await
        .expect("store");
    assert_eq!(
        store
            .get_result(&all(), &id)
            .await
            .expect("result")
            .task
            .status,
        TaskStatus::Completed
    );
}

async fn renewals_keep_a_long_task_alive(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let claim = store
        .claim(&tenant(), &id, 1, "steady")
        .await
        .expect("claim");
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(
            store
                .renew(&tenant(), &id, &claim.lease_token)
                .await
                .expect("renew"),
            Renewal::KeepRunning
        );
        assert_eq!(store.reap_expired_leases().await.expect("reap"), 0);
    }
    // Never taken away from a live worker: no new generation exists.
    assert_err!(
        store.claim(&tenant(), &id, 2, "thief").await,
        StoreError::FailedPrecondition(_)
    );
}

async fn a_poison_task_fails_after_its_attempts(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, Some(2)).await;
    for attempt in 1..=2u64 {
        store
            .claim(&tenant(), &id, attempt, &format!("crashy-{attempt}"))
            .await
            .expect("claim");
        let_leases_expire().await;
        assert_eq!(store.reap_expired_leases().await.expect("reap"), 1);
    }
    let result = store
        .get_result(&all(), &id)
        .await
        .expect("a failure result");
    assert_eq!(result.task.status, TaskStatus::Failed);
    let message = result.task.status_message.unwrap_or_default();
    assert!(
        message.contains("failed after 2 attempts") && message.contains("crashy-2"),
        "{message}"
    );
    let body: serde_json::Value = serde_json::from_str(result.result.as_str()).expect("json");
    assert_eq!(body["isError"], true);
}

async fn retryable_errors_back_off_then_fail_and_shutdown_gives_the_attempt_back(
    backend: &dyn ExecBackend,
) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, Some(2)).await;

    let claim = store.claim(&tenant(), &id, 1, "w").await.expect("claim");
    let outcome = store
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::Shutdown,
            "stopping",
        )
        .await
        .expect("release");
    assert_eq!(
        outcome,
        ReleaseOutcome::Retry {
            after: Duration::ZERO
        }
    );
    let claim = store
        .claim(&tenant(), &id, 2, "w")
        .await
        .expect("claim after shutdown");
    assert_eq!(claim.attempt, 1, "a shutdown does not use an attempt");

    let outcome = store
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::RetryableError,
            "timeout upstream",
        )
        .await
        .expect("release");
    let ReleaseOutcome::Retry { after } = outcome else {
        panic!("expected a retry, got {outcome:?}")
    };
    assert!(
        after >= Duration::from_millis(100) && after <= Duration::from_millis(200),
        "{after:?}"
    );
    let message = store
        .get_task(&all(), &id)
        .await
        .expect("get")
        .status_message
        .unwrap_or_default();
    assert!(
        message.contains("attempt 1 of 2 failed: timeout upstream"),
        "{message}"
    );
    assert_err!(
        store
            .release(
                &tenant(),
                &id,
                &claim.lease_token,
                ReleaseReason::RetryableError,
                "again"
            )
            .await,
        StoreError::FailedPrecondition(_)
    );

    let claim = store
        .claim(&tenant(), &id, 3, "w")
        .await
        .expect("claim the retry");
    assert_eq!(claim.attempt, 2);
    let outcome = store
        .release(
            &tenant(),
            &id,
            &claim.lease_token,
            ReleaseReason::RetryableError,
            "still down",
        )
        .await
        .expect("release");
    assert_eq!(outcome, ReleaseOutcome::Failed);
    let result = store.get_result(&all(), &id).await.expect("failure result");
    assert_eq!(result.task.status, TaskStatus::Failed);
    assert!(
        result
            .task
            .status_message
            .unwrap_or_default()
            .contains("failed after 2 attempts: still down")
    );
}

async fn cancellation_reaches_the_running_attempt_at_once(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let claim = store.claim(&tenant(), &id, 1, "w").await.expect("claim");
    let mut watch = store.watch_task(&all(), &id).await.expect("watch");
    watch.next().await.expect("first").expect("task");
    let started = tokio::time::Instant::now();
    store.cancel_task(&all(), &id).await.expect("cancel");
    let seen = tokio::time::timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("notified")
        .expect("item")
        .expect("task");
    assert_eq!(seen.status, TaskStatus::Cancelled);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "seen in {:?}",
        started.elapsed()
    );
    assert_eq!(
        store
            .renew(&tenant(), &id, &claim.lease_token)
            .await
            .expect("renew"),
        Renewal::Stop("the task was cancelled".into())
    );
    assert_err!(
        store
            .store_result(&all(), &id, result(&claim.lease_token))
            .await,
        StoreError::FailedPrecondition(_)
    );
    assert_err!(
        store.get_result(&all(), &id).await,
        StoreError::FailedPrecondition(_)
    );
}

/// A publisher that records what it is given.
#[derive(Default)]
struct Recorder {
    jobs: Mutex<Vec<JobMessage>>,
    routable: bool,
    down: bool,
}

#[async_trait]
impl JobPublisher for Recorder {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        if self.down {
            return Err(PublishError("broker down".into()));
        }
        self.jobs.lock().expect("lock").push(job.clone());
        Ok(if self.routable {
            Published::Queued
        } else {
            Published::NoWorkerForTool
        })
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }
}

async fn the_relay_publishes_each_job_once_and_drops_stale_ones(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let kept = dispatched(&*store, None).await;
    let cancelled = dispatched(&*store, None).await;
    store.cancel_task(&all(), &cancelled).await.expect("cancel");

    let down = Recorder {
        down: true,
        ..Recorder::default()
    };
    assert_err!(
        store.relay_due_jobs(&down, 100).await,
        StoreError::Unavailable(_)
    );

    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(store.relay_due_jobs(&queue, 100).await.expect("relay"), 1);
    assert_eq!(
        store
            .relay_due_jobs(&queue, 100)
            .await
            .expect("relay again"),
        0,
        "published rows are gone"
    );
    let jobs = queue.jobs.lock().expect("lock").clone();
    assert_eq!(
        jobs,
        [JobMessage {
            tenant_id: "default".into(),
            task_id: kept.to_string(),
            generation: 1,
            tool: "echo".into()
        }]
    );
}

async fn a_job_for_an_unserved_tool_waits_and_says_so(backend: &dyn ExecBackend) {
    let policy = ExecutionPolicy {
        unroutable_retry: Duration::from_millis(300),
        ..short_leases()
    };
    let store = backend.open(policy).await;
    let id = dispatched(&*store, None).await;
    let nobody = Recorder::default();
    assert_eq!(store.relay_due_jobs(&nobody, 100).await.expect("relay"), 0);
    let task = store.get_task(&all(), &id).await.expect("get");
    assert_eq!(
        task.status_message.as_deref(),
        Some("waiting for a worker that serves tool echo")
    );
    assert_eq!(store.relay_due_jobs(&nobody, 100).await.expect("relay"), 0);
    assert_eq!(
        nobody.jobs.lock().expect("lock").len(),
        1,
        "not offered again before its retry time"
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        store.relay_due_jobs(&queue, 100).await.expect("relay"),
        1,
        "offered again once a worker may exist"
    );
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
    let id = dispatched(&replica_a, None).await;
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
        .claim(&tenant(), &id, 1, "w")
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

async fn the_execution_api_refuses_hostile_input_and_changes_nothing(backend: &dyn ExecBackend) {
    use taskstore::grpc::{InputLimits, TaskExecutionService, TaskStoreService, pb};
    use taskstore::server::Server;
    use tonic::Code;

    let store = backend.open(short_leases()).await;
    let id = dispatched(&*store, None).await;
    let server = Server::bind(
        "127.0.0.1:0".parse().expect("addr"),
        TaskStoreService::new(store.clone(), InputLimits::default()),
    )
    .await
    .expect("bind")
    .with_execution(TaskExecutionService::new(store.clone()));
    let addr = server.local_addr().expect("addr");
    tokio::spawn(server.run(tokio_util::sync::CancellationToken::new()));
    let mut client =
        pb::task_execution_client::TaskExecutionClient::new(common::grpc_channel(addr).await);

    let claim = |task_id: &str, worker_id: &str, tenant_id: &str| pb::ClaimTaskRequest {
        task_id: task_id.into(),
        generation: 1,
        worker_id: worker_id.into(),
        tenant_id: tenant_id.into(),
    };
    let long_worker = "w".repeat(300);
    for (request, what) in [
        (claim("", "w", ""), "empty task id"),
        (claim("a b", "w", ""), "bad task id"),
        (claim(id.as_str(), "", ""), "empty worker id"),
        (claim(id.as_str(), &long_worker, ""), "huge worker id"),
        (claim(id.as_str(), "w\n", ""), "control characters"),
        (claim(id.as_str(), "w", "bad tenant"), "bad tenant"),
    ] {
        let status = client.claim_task(request).await.expect_err(what);
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
    }
    let status = client
        .claim_task(pb::ClaimTaskRequest {
            generation: u64::MAX,
            ..claim(id.as_str(), "w", "")
        })
        .await
        .expect_err("generation out of range");
    assert_eq!(status.code(), Code::InvalidArgument);

    let renew = pb::RenewLeaseRequest {
        task_id: id.to_string(),
        lease_token: String::new(),
        tenant_id: String::new(),
    };
    assert_eq!(
        client
            .renew_lease(renew)
            .await
            .expect_err("empty token")
            .code(),
        Code::InvalidArgument
    );
    for reason in [0, 3, -7] {
        let release = pb::ReleaseTaskRequest {
            task_id: id.to_string(),
            lease_token: "token".into(),
            reason,
            message: String::new(),
            tenant_id: String::new(),
        };
        assert_eq!(
            client
                .release_task(release)
                .await
                .expect_err("bad reason")
                .code(),
            Code::InvalidArgument
        );
    }
    let forged = pb::ReleaseTaskRequest {
        task_id: id.to_string(),
        lease_token: "forged".into(),
        reason: pb::ReleaseReason::Shutdown.into(),
        message: String::new(),
        tenant_id: String::new(),
    };
    assert_eq!(
        client
            .release_task(forged)
            .await
            .expect_err("not the lease")
            .code(),
        Code::FailedPrecondition
    );

    // Nothing above changed the task: the real claim still works.
    let granted = client
        .claim_task(claim(id.as_str(), "w", ""))
        .await
        .expect("claim")
        .into_inner();
    assert_eq!(granted.attempt, 1);
    assert_eq!(granted.tool, "echo");
}

/// A shared recorder that the relay loop can (re)connect to.
#[derive(Clone, Default)]
struct SharedRecorder(Arc<Recorder>);

#[async_trait]
impl JobPublisher for SharedRecorder {
    async fn publish(&self, job: &JobMessage) -> Result<Published, PublishError> {
        self.0.publish(job).await
    }

    async fn publish_all(&self, jobs: &[JobMessage]) -> Vec<Result<Published, PublishError>> {
        publish_each(self, jobs).await
    }
}

impl taskstore::dispatch::relay::Publisher for SharedRecorder {
    fn is_connected(&self) -> bool {
        true
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replicas_relaying_at_once_publish_each_job_once() {
    let pool = common::migrated_pool().await;
    let replicas: Vec<_> = open_all((0..3).map(|_| {
        PgTaskStore::open(
            pool.clone(),
            StoreConfig {
                execution: short_leases(),
                ..StoreConfig::default()
            },
        )
    }))
    .await;
    let mut ids = Vec::new();
    for _ in 0..60 {
        ids.push(dispatched(&replicas[0], None).await);
    }
    let queue = SharedRecorder(Arc::new(Recorder {
        routable: true,
        ..Recorder::default()
    }));
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

async fn the_relay_wakes_at_once_on_a_new_job(backend: &dyn ExecBackend) {
    let store = backend.open(short_leases()).await;
    let queue = SharedRecorder(Arc::new(Recorder {
        routable: true,
        ..Recorder::default()
    }));
    let connect: taskstore::dispatch::relay::Connect<SharedRecorder> = {
        let queue = queue.clone();
        Arc::new(move || {
            let queue = queue.clone();
            Box::pin(async move { Ok(queue) })
        })
    };
    let shutdown = tokio_util::sync::CancellationToken::new();
    // A poll interval of an hour: only the wake-up can publish in time.
    let relay = taskstore::dispatch::relay::spawn(
        store.clone(),
        connect,
        Duration::from_secs(3600),
        shutdown.clone(),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let id = dispatched(&*store, None).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while queue.0.jobs.lock().expect("lock").is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the relay did not wake for the new job"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        queue.0.jobs.lock().expect("lock")[0].task_id,
        id.to_string()
    );
    shutdown.cancel();
    relay.await.expect("relay stops");
}
