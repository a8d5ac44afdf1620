//! Authentication, tenants and roles, through a real service with
//! `--auth api-keys` on every backend: what each identity can reach, and
//! that nothing else is reachable, not even a task's existence.

#[path = "../common/mod.rs"]
mod common;

mod jwt;
mod leases;
mod limits;
mod mtls;
mod probe;
mod probe_calls;
mod roles;
mod workers;

use std::net::SocketAddr;
use std::sync::Arc;

use taskstore::auth::AuthMethod;
use taskstore::domain::{Role, TenantId};
use taskstore::grpc::{InputLimits, pb};
use taskstore::settings::ServiceSettings;
use taskstore::startup::{Backends, Service};
use taskstore::store::StoreConfig;
use taskstore::store::keys::{KeyStore, MemoryKeys, PgKeys};
use taskstore_proto::credentials::BearerToken;
use tokio_util::sync::CancellationToken;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

use pb::operations_client::OperationsClient;
use pb::task_execution_client::TaskExecutionClient;
use pb::task_store_client::TaskStoreClient;

pub type Authed = InterceptedService<Channel, BearerToken>;

/// Where the service keeps its tasks and keys.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    Memory,
    Sqlite,
    Postgres,
}

/// A running service with authentication on, and a way to make keys.
pub struct World {
    pub addr: SocketAddr,
    /// Where `/mcp` is served, when the settings turn it on.
    pub mcp: Option<SocketAddr>,
    pub keys: Arc<dyn KeyStore>,
    _shutdown: tokio_util::sync::DropGuard,
}

impl std::fmt::Debug for World {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("World")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl World {
    pub async fn new(kind: Kind) -> Self {
        Self::configured(kind, StoreConfig::default(), |settings| settings).await
    }

    /// A world whose store has `config`, and whose service settings
    /// `adjust` changes.
    pub async fn configured(
        kind: Kind,
        config: StoreConfig,
        adjust: impl FnOnce(ServiceSettings) -> ServiceSettings,
    ) -> Self {
        let backends = match kind {
            Kind::Memory => {
                let store = Arc::new(
                    taskstore::store::memory::MemoryTaskStore::new(config).expect("store"),
                );
                Backends::from_store(store, "memory", "memory".into())
                    .with_keys(Arc::new(MemoryKeys::default()))
            }
            Kind::Sqlite => {
                let path = common::sqlite_path();
                let store = Arc::new(
                    taskstore::store::sqlite::open(&path, config)
                        .await
                        .expect("sqlite"),
                );
                let keys = taskstore::store::sqlite::keys(&path)
                    .await
                    .expect("sqlite keys");
                Backends::from_store(store, "sqlite", path.display().to_string())
                    .with_keys(Arc::new(keys))
            }
            Kind::Postgres => {
                let pool = common::migrated_pool().await;
                let store = Arc::new(
                    taskstore::store::postgres::PgTaskStore::open(pool.clone(), config)
                        .await
                        .expect("open"),
                );
                Backends::from_store(store, "postgres", "a test schema".into())
                    .with_keys(Arc::new(PgKeys::new(pool)))
            }
        };
        let keys = backends.keys.clone();
        let settings = adjust(ServiceSettings {
            auth: vec![AuthMethod::ApiKeys],
            ..ServiceSettings::bare(StoreConfig::default(), InputLimits::default())
        });
        let service = Service::build(settings, backends).await.expect("service");
        let addr = service.local_addr();
        let mcp = service.mcp_addr();
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move { service.run_until_stopped(token).await.expect("runs") });
        Self {
            addr,
            mcp,
            keys,
            _shutdown: shutdown.drop_guard(),
        }
    }

    /// A fresh key for `role` in `tenant` (`*`: every tenant).
    pub async fn key(&self, tenant: &str, role: Role) -> String {
        common::issue_key(self.keys.as_ref(), tenant, role).await
    }

    pub async fn identity(&self, token: Option<&str>) -> Identity {
        let channel = common::grpc_channel(self.addr).await;
        let token = match token {
            Some(token) => BearerToken::new(token).expect("token"),
            None => BearerToken::none(),
        };
        let authed = InterceptedService::new(channel, token);
        Identity {
            store: TaskStoreClient::new(authed.clone()),
            execution: TaskExecutionClient::new(authed.clone()),
            operations: OperationsClient::new(authed),
        }
    }
}

/// One caller's clients of the three services.
#[derive(Debug, Clone)]
pub struct Identity {
    pub store: TaskStoreClient<Authed>,
    pub execution: TaskExecutionClient<Authed>,
    pub operations: OperationsClient<Authed>,
}

pub fn tenant(name: &str) -> TenantId {
    TenantId::parse(name).expect("tenant")
}

/// `message` as a request naming `tenant` in its metadata.
pub fn naming<T>(tenant: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        taskstore_proto::TENANT_METADATA,
        tenant.parse().expect("ascii"),
    );
    request
}

pub fn create(
    task_id: Option<&str>,
    session: Option<&str>,
    dispatch: bool,
) -> pb::CreateTaskRequest {
    pb::CreateTaskRequest {
        idempotency_key: None,
        no_expiry: false,
        poll_interval: None,
        task_id: task_id.map(str::to_owned),
        session_id: session.map(str::to_owned),
        ttl: None,
        request_id_json: "1".into(),
        request_json: r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}"#.into(),
        dispatch: dispatch.then_some(pb::Dispatch {
            priority: Default::default(),
            start_at: None, start_after: None,
            tool: None,
            max_attempts: None,
        }),
    }
}
