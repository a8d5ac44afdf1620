//! The gRPC server: binds first (so callers, and tests on port 0, know the
//! address before it runs), then serves the task store, `grpc.health.v1` and
//! reflection (v1, and v1alpha for older clients such as Python's
//! grpcio-reflection) until the shutdown token fires.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};
use tonic_health::ServingStatus;

use crate::auth::Authenticator;
use crate::grpc::{
    Authenticate, ObserveRpcs, OperationsService, OversizeIsResourceExhausted,
    TaskExecutionService, TaskStoreService,
};
use crate::settings::ServerTls;

/// The name health checks use for the task store service.
pub const SERVICE_NAME: &str = "mcp.tasks.v1.TaskStore";
/// The name health checks use for the worker-facing execution service.
pub const EXECUTION_SERVICE_NAME: &str = "mcp.tasks.v1.TaskExecution";

/// How often each connection is pinged, and how long its answer may take.
const PING_EVERY: Duration = Duration::from_secs(20);
const PING_ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Every protobuf this server describes through reflection.
const DESCRIPTORS: [&[u8]; 2] = [
    taskstore_proto::FILE_DESCRIPTOR_SET,
    tonic_health::pb::FILE_DESCRIPTOR_SET,
];

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
    #[error("the mcp endpoint failed: {0}")]
    Mcp(String),
    #[error("the dashboard failed: {0}")]
    Dashboard(String),
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    service: TaskStoreService,
    execution: Option<TaskExecutionService>,
    operations: Option<OperationsService>,
    shutdown_grace: Duration,
    authenticator: Authenticator,
    tls: Option<ServerTlsConfig>,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub async fn bind(addr: SocketAddr, service: TaskStoreService) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            service,
            execution: None,
            operations: None,
            shutdown_grace: Duration::from_secs(30),
            authenticator: Authenticator::Off,
            tls: None,
        })
    }

    /// Serves TLS (and verifies client certificates when it says so).
    pub fn with_tls(mut self, tls: Option<&ServerTls>) -> Self {
        self.tls = tls.map(|tls| {
            let mut config =
                ServerTlsConfig::new().identity(Identity::from_pem(&tls.cert_pem, &tls.key_pem));
            if let Some(ca) = &tls.client_ca_pem {
                config = config
                    .client_ca_root(Certificate::from_pem(ca))
                    .client_auth_optional(!tls.require_client_cert);
            }
            config
        });
        self
    }

    /// Who may call (default: anyone, as with `--auth none`).
    pub fn with_authenticator(mut self, authenticator: Authenticator) -> Self {
        self.authenticator = authenticator;
        self
    }

    /// Also serves the worker-facing execution API.
    pub fn with_execution(mut self, execution: TaskExecutionService) -> Self {
        self.execution = Some(execution);
        self
    }

    /// Also serves the operators' status API.
    pub fn with_operations(mut self, operations: OperationsService) -> Self {
        self.operations = Some(operations);
        self
    }

    /// How long in-flight RPCs may take to finish once shutdown begins.
    pub fn with_shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` is cancelled; then reports NOT_SERVING, stops
    /// accepting, ends open streams and waiting calls with UNAVAILABLE, and
    /// waits up to the grace period for the other in-flight RPCs.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
        let reflection = || {
            DESCRIPTORS.into_iter().fold(
                tonic_reflection::server::Builder::configure(),
                |builder, descriptor| builder.register_encoded_file_descriptor_set(descriptor),
            )
        };
        let reflection_v1 = reflection().build_v1()?;
        let reflection_v1alpha = reflection().build_v1alpha()?;

        let grace = self.shutdown_grace;
        let stop_accepting = {
            let shutdown = shutdown.clone();
            async move {
                shutdown.cancelled().await;
                for service in ["", SERVICE_NAME] {
                    health
                        .set_service_status(service, ServingStatus::NotServing)
                        .await;
                }
                tracing::info!(
                    grace_secs = grace.as_secs_f64(),
                    "shutting down the grpc server: no new connections; open streams end now; waiting for in-flight rpcs"
                );
            }
        };
        let incoming = TcpIncoming::from(self.listener).with_nodelay(Some(true));
        // A peer that stops answering pings (gone, or never reading) is
        // dropped rather than holding its connection for good.
        let mut builder = tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(PING_EVERY))
            .http2_keepalive_timeout(Some(PING_ANSWER_WITHIN));
        if let Some(tls) = self.tls {
            builder = builder.tls_config(tls)?;
        }
        let serve = builder
            // Outermost first: the observer sees the final status code.
            .layer(ObserveRpcs)
            .layer(Authenticate::new(self.authenticator))
            .layer(OversizeIsResourceExhausted::layer())
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(self.service.with_shutdown(shutdown.clone()).into_server())
            .add_optional_service(
                self.execution
                    .map(|execution| execution.with_shutdown(shutdown.clone()).into_server()),
            )
            .add_optional_service(self.operations.map(OperationsService::into_server))
            .serve_with_incoming_shutdown(incoming, stop_accepting);
        tokio::pin!(serve);

        tokio::select! {
            result = &mut serve => return result.map_err(ServeError::from),
            () = shutdown.cancelled() => {}
        }
        match tokio::time::timeout(self.shutdown_grace, serve).await {
            Ok(result) => result.map_err(ServeError::from),
            Err(_) => {
                tracing::warn!(
                    grace_secs = self.shutdown_grace.as_secs_f64(),
                    "in-flight rpcs did not finish within the shutdown grace period; dropping them"
                );
                Ok(())
            }
        }
    }
}
