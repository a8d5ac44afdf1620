//! The gRPC server: binds first (so callers, and tests on port 0, know the
//! address before it runs), then serves the task store, `grpc.health.v1` and
//! reflection v1 until the shutdown token fires.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tonic::transport::server::TcpIncoming;
use tonic_health::ServingStatus;

use crate::grpc::{OversizeIsResourceExhausted, TaskExecutionService, TaskStoreService};

/// The name health checks use for the task store service.
pub const SERVICE_NAME: &str = "mcp.tasks.v1.TaskStore";
/// The name health checks use for the worker-facing execution service.
pub const EXECUTION_SERVICE_NAME: &str = "mcp.tasks.v1.TaskExecution";

/// Why the server stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("could not build the reflection service: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    #[error("the gRPC server failed: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    service: TaskStoreService,
    execution: Option<TaskExecutionService>,
    shutdown_grace: Duration,
}

impl Server {
    /// Binds `addr` (port 0 picks a free port; see [`Server::local_addr`]).
    pub async fn bind(addr: SocketAddr, service: TaskStoreService) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            service,
            execution: None,
            shutdown_grace: Duration::from_secs(30),
        })
    }

    /// Also serves the worker-facing execution API.
    pub fn with_execution(mut self, execution: TaskExecutionService) -> Self {
        self.execution = Some(execution);
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
    /// accepting, and waits up to the grace period for in-flight RPCs.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ServeError> {
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE_NAME, ServingStatus::Serving)
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(taskstore_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()?;

        let stop_accepting = {
            let shutdown = shutdown.clone();
            async move {
                shutdown.cancelled().await;
                for service in ["", SERVICE_NAME] {
                    health
                        .set_service_status(service, ServingStatus::NotServing)
                        .await;
                }
                tracing::info!("shutting down: no new connections, finishing in-flight rpcs");
            }
        };
        let incoming = TcpIncoming::from(self.listener).with_nodelay(Some(true));
        let serve = tonic::transport::Server::builder()
            .layer(OversizeIsResourceExhausted::layer())
            .add_service(health_service)
            .add_service(reflection)
            .add_service(self.service.into_server())
            .add_optional_service(self.execution.map(TaskExecutionService::into_server))
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
