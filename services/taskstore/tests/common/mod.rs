//! Shared test harness: real PostgreSQL (a fresh schema per store), a real
//! gRPC server on an ephemeral port, and the backends the conformance suite
//! runs against.

#![allow(dead_code)] // each test binary uses a different part

pub mod proxy;
pub mod recorder;
pub mod slow_clients;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use taskstore::grpc::{GrpcExecutionStore, GrpcTaskStore, InputLimits};
use taskstore::settings::ServiceSettings;
use taskstore::startup::{Backends, Service};
use taskstore::store::execution::{DispatchStore, ExecutionStore};
use taskstore::store::memory::MemoryTaskStore;
use taskstore::store::operations::OperationsStore;
use taskstore::store::postgres::{self, PgTaskStore, PoolSettings};
use taskstore::store::{InsightsSource, StoreConfig, TaskInsights, TaskStore};
use tokio_util::sync::CancellationToken;

const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA_PREFIX: &str = "tstest_";
/// Schemas left behind by crashed runs are dropped once they are this old.
const STALE_SCHEMA_SECS: u64 = 3600;

pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned())
}

fn base_options() -> PgConnectOptions {
    let url = database_url();
    url.parse()
        .unwrap_or_else(|err| panic!("DATABASE_URL {url:?} is not a valid PostgreSQL URL: {err}"))
}

/// A one-connection pool to the test database; fails the test with a message
/// naming PostgreSQL when it is not reachable.
pub async fn admin_pool() -> PgPool {
    PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(base_options())
        .await
        .unwrap_or_else(|err| {
            panic!(
                "PostgreSQL is not reachable at {} (set DATABASE_URL, or start it with \
                 `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`): {err}",
                database_url()
            )
        })
}

/// A new, empty schema; returns connection options whose search_path is it.
pub async fn fresh_schema() -> (PgConnectOptions, String) {
    let admin = admin_pool().await;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    drop_stale_schemas(&admin, now).await;
    let mut suffix = [0u8; 6];
    getrandom::getrandom(&mut suffix).expect("os randomness");
    let suffix: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    let schema = format!("{SCHEMA_PREFIX}{now}_{suffix}");
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await
        .expect("create test schema");
    admin.close().await;
    let options = base_options().options([("search_path", schema.as_str())]);
    (options, schema)
}

async fn drop_stale_schemas(admin: &PgPool, now: u64) {
    let schemas: Vec<String> = sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'tstest\\_%'",
    )
    .fetch_all(admin)
    .await
    .expect("list test schemas");
    for schema in schemas {
        let created = schema
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|created| created + STALE_SCHEMA_SECS < now) {
            // Another run may be dropping it too; either way it goes.
            let _ = sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .execute(admin)
                .await;
        }
    }
}

pub fn test_pool_settings() -> PoolSettings {
    PoolSettings {
        max_connections: 10,
        acquire_timeout: Duration::from_secs(10),
    }
}

/// A migrated pool on a fresh schema.
pub async fn migrated_pool() -> PgPool {
    let (options, _) = fresh_schema().await;
    let pool = postgres::lazy_pool(options, test_pool_settings());
    postgres::migrate(&pool).await.expect("migrations apply");
    pool
}

pub async fn pg_store(config: StoreConfig) -> PgTaskStore {
    PgTaskStore::open(migrated_pool().await, config)
        .await
        .expect("store opens")
}

/// Every role a test store plays.
pub trait FullStore:
    TaskStore + ExecutionStore + DispatchStore + OperationsStore + InsightsSource
{
}
impl<S: TaskStore + ExecutionStore + DispatchStore + OperationsStore + InsightsSource> FullStore
    for S
{
}

/// The service over `store` on an ephemeral port, started as `serve` starts
/// it (`Service::build`, then `run_until_stopped`), with `settings`. It
/// stops when the returned token is cancelled.
pub async fn spawn_service<S: FullStore>(
    store: Arc<S>,
    settings: ServiceSettings,
) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    let backends = Backends::from_store(store, "test", "a test store".to_owned());
    let service = Service::build(settings, backends)
        .await
        .expect("the service builds on an ephemeral port");
    let addr = service.local_addr();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    let handle = tokio::spawn(async move {
        service
            .run_until_stopped(token)
            .await
            .expect("the service runs");
    });
    (addr, shutdown, handle)
}

/// The service over `store` with no relay, chores or workers (tests drive
/// those themselves) and `limits`.
pub async fn spawn_server<S: FullStore>(
    store: Arc<S>,
    limits: InputLimits,
) -> (SocketAddr, CancellationToken, tokio::task::JoinHandle<()>) {
    spawn_service(store, ServiceSettings::bare(StoreConfig::default(), limits)).await
}

pub async fn grpc_channel(addr: SocketAddr) -> tonic::transport::Channel {
    tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .expect("endpoint")
        .connect()
        .await
        .expect("connect to the test server")
}

/// A store as the cases use it: the task-store API, the worker-facing
/// execution API, and the service's own dispatch side.
pub struct Stores {
    pub store: Arc<dyn TaskStore>,
    pub execution: Arc<dyn ExecutionStore>,
    pub dispatch: Arc<dyn DispatchStore>,
    /// The worker registry, on the store itself (heartbeats come through
    /// it; the gRPC edge reads the tools served from it).
    pub operations: Arc<dyn OperationsStore>,
    /// The dashboard's reads, on the store itself (they are not served
    /// over gRPC).
    pub insights: Arc<dyn TaskInsights>,
}

/// `store` called directly, in every role.
fn direct<S: FullStore>(store: S) -> Stores {
    let store = Arc::new(store);
    Stores {
        store: store.clone(),
        execution: store.clone(),
        dispatch: store.clone(),
        operations: store.clone(),
        insights: S::insights_reader(&store),
    }
}

/// `store` behind the gRPC service: the task-store and execution APIs
/// through the gRPC clients, the dispatch side (the service's own loops) on
/// the store itself.
async fn over_grpc<S: FullStore>(store: S) -> Stores {
    let store = Arc::new(store);
    let (addr, _shutdown, _handle) = spawn_server(store.clone(), InputLimits::default()).await;
    let channel = grpc_channel(addr).await;
    Stores {
        store: Arc::new(GrpcTaskStore::new(channel.clone())),
        execution: Arc::new(GrpcExecutionStore::new(channel)),
        dispatch: store.clone(),
        operations: store.clone(),
        insights: S::insights_reader(&store),
    }
}

/// A way to get a fresh, empty store with a given configuration.
#[async_trait]
pub trait Backend: Sync {
    async fn stores(&self, config: StoreConfig) -> Stores;

    async fn store(&self, config: StoreConfig) -> Arc<dyn TaskStore> {
        self.stores(config).await.store
    }

    /// Whether the store can act for tenants other than the default one.
    fn chooses_tenant(&self) -> bool;
}

fn memory_store(config: StoreConfig) -> MemoryTaskStore {
    MemoryTaskStore::new(config).expect("memory store")
}

/// PostgreSQL, called directly.
pub struct Postgres;

#[async_trait]
impl Backend for Postgres {
    async fn stores(&self, config: StoreConfig) -> Stores {
        direct(pg_store(config).await)
    }
    fn chooses_tenant(&self) -> bool {
        true
    }
}

/// PostgreSQL behind the gRPC service.
pub struct GrpcOverPostgres;

#[async_trait]
impl Backend for GrpcOverPostgres {
    async fn stores(&self, config: StoreConfig) -> Stores {
        over_grpc(pg_store(config).await).await
    }
    fn chooses_tenant(&self) -> bool {
        false
    }
}

/// The in-memory store, called directly.
pub struct Memory;

#[async_trait]
impl Backend for Memory {
    async fn stores(&self, config: StoreConfig) -> Stores {
        direct(memory_store(config))
    }
    fn chooses_tenant(&self) -> bool {
        true
    }
}

/// The in-memory store behind the gRPC service.
pub struct GrpcOverMemory;

#[async_trait]
impl Backend for GrpcOverMemory {
    async fn stores(&self, config: StoreConfig) -> Stores {
        over_grpc(memory_store(config)).await
    }
    fn chooses_tenant(&self) -> bool {
        false
    }
}

/// A fresh SQLite file under cargo's per-target scratch directory.
pub fn sqlite_path() -> std::path::PathBuf {
    let mut suffix = [0u8; 8];
    getrandom::getrandom(&mut suffix).expect("os randomness");
    let name: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
    std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("store-{name}.db"))
}

pub async fn sqlite_store(config: StoreConfig) -> taskstore::store::memory::MemoryTaskStore {
    taskstore::store::sqlite::open(&sqlite_path(), config)
        .await
        .expect("sqlite store")
}

/// The SQLite store, called directly.
pub struct Sqlite;

#[async_trait]
impl Backend for Sqlite {
    async fn stores(&self, config: StoreConfig) -> Stores {
        direct(sqlite_store(config).await)
    }
    fn chooses_tenant(&self) -> bool {
        true
    }
}

/// The SQLite store behind the gRPC service.
pub struct GrpcOverSqlite;

#[async_trait]
impl Backend for GrpcOverSqlite {
    async fn stores(&self, config: StoreConfig) -> Stores {
        over_grpc(sqlite_store(config).await).await
    }
    fn chooses_tenant(&self) -> bool {
        false
    }
}

/// A fresh API key for `role` in `tenant` (`*`: every tenant), stored in
/// `keys`.
pub async fn issue_key(
    keys: &dyn taskstore::store::keys::KeyStore,
    tenant: &str,
    role: taskstore::domain::Role,
) -> String {
    let reach = taskstore::domain::Reach::parse(tenant).expect("reach");
    let issued = taskstore::auth::api_keys::issue(reach, role, "test").expect("issue");
    keys.insert_key(&issued.stored)
        .await
        .expect("store the key");
    issued.key
}
