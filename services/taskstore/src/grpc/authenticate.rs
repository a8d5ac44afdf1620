//! Every RPC authenticated and authorized once, before any handler: a tower
//! layer that reads `authorization: Bearer …`, asks the configured methods
//! who the caller is, checks the caller's role may call the method, and
//! hands the [`Caller`] to the handler in the request's extensions. Health
//! and reflection stay open (probes, grpcurl). Refusals say as little as
//! possible: UNAUTHENTICATED for any credential problem, PERMISSION_DENIED
//! naming the role and method.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use taskstore_telemetry::grpc::rpc_name;
use tonic::Status;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};
use tower::{Layer, Service};

use super::observe::CallerSlot;
use crate::auth::{AuthFailure, Authenticator, bearer_token};
use crate::domain::{Caller, may_call};

/// The layer: `Server::builder().layer(Authenticate::new(authenticator))`.
#[derive(Debug, Clone)]
pub struct Authenticate {
    authenticator: Authenticator,
}

impl Authenticate {
    pub fn new(authenticator: Authenticator) -> Self {
        Self { authenticator }
    }
}

impl<S> Layer<S> for Authenticate {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Authenticated {
            inner,
            authenticator: self.authenticator.clone(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct Authenticated<S> {
    inner: S,
    authenticator: Authenticator,
}

/// Services anyone may call.
fn is_open(service: &str) -> bool {
    service == "grpc.health.v1.Health" || service.starts_with("grpc.reflection.")
}

/// The client's certificate (DER), when the connection is TLS and the
/// client presented one (the handshake verified it against the CA).
fn client_certificate<B>(request: &http::Request<B>) -> Option<Vec<u8>> {
    let info = request
        .extensions()
        .get::<TlsConnectInfo<TcpConnectInfo>>()?;
    let certificates = info.peer_certs()?;
    certificates.first().map(|der| der.as_ref().to_vec())
}

/// What a refused caller is told.
fn refusal(failure: &AuthFailure) -> Status {
    match failure {
        AuthFailure::Missing | AuthFailure::Invalid(_) => {
            Status::unauthenticated("missing or invalid credentials")
        }
        AuthFailure::Unavailable(_) => {
            Status::unavailable("credentials cannot be checked now; retry")
        }
    }
}

impl<S, ReqBody, ResBody> Service<http::Request<ReqBody>> for Authenticated<S>
where
    S: Service<http::Request<ReqBody>, Response = http::Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    ResBody::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<ReqBody>) -> Self::Future {
        // The ready service handles this request; its clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let authenticator = self.authenticator.clone();
        Box::pin(async move {
            let (service, method) = rpc_name(request.uri().path());
            let (service, method) = (service.to_owned(), method.to_owned());
            // With authentication off there are no roles to check: the one
            // anonymous caller may call everything, as before roles existed.
            let slot = request.extensions().get::<CallerSlot>().cloned();
            if matches!(authenticator, Authenticator::Off) {
                let caller = Caller::unauthenticated();
                if let Some(slot) = &slot {
                    slot.set(caller.subject.clone());
                }
                request.extensions_mut().insert(caller);
            } else if !is_open(&service) {
                let certificate = client_certificate(&request);
                let caller = authenticator
                    .authenticate(bearer_token(request.headers()), certificate.as_deref())
                    .await;
                if let Some(slot) = &slot {
                    slot.set(match &caller {
                        Ok(caller) => caller.subject.clone(),
                        Err(failure) => refused_as(failure),
                    });
                }
                match decide(caller, &service, &method) {
                    Ok(caller) => {
                        request.extensions_mut().insert(caller);
                    }
                    Err(status) => return Ok(status.into_http()),
                }
            }
            let response = inner.call(request).await?;
            Ok(response.map(tonic::body::Body::new))
        })
    }
}

/// How the access log names a refused caller: its credential when it
/// names one (`key:<id>`), and why.
fn refused_as(failure: &AuthFailure) -> String {
    format!(
        "{} (refused: {})",
        failure.credential().unwrap_or("unknown"),
        failure.reason()
    )
}

/// The caller, if it may call `service/method`.
fn decide(
    caller: Result<Caller, AuthFailure>,
    service: &str,
    method: &str,
) -> Result<Caller, Status> {
    let caller = caller.map_err(|failure| {
        match &failure {
            AuthFailure::Unavailable(cause) => {
                tracing::warn!(error = %cause, "credentials could not be checked");
            }
            AuthFailure::Missing | AuthFailure::Invalid(_) => {
                tracing::info!(
                    rpc.method = %method,
                    credential = failure.credential().unwrap_or("-"),
                    reason = failure.reason(),
                    "request refused: not authenticated"
                );
            }
        }
        refusal(&failure)
    })?;
    if !may_call(&caller, service, method) {
        tracing::info!(subject = %caller.subject, role = %caller.role, rpc.method = %method, "request refused: not allowed");
        return Err(Status::permission_denied(format!(
            "the {} role may not call {method}",
            caller.role
        )));
    }
    Ok(caller)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_tell_nothing_about_the_credentials() {
        for failure in [
            AuthFailure::Missing,
            AuthFailure::invalid_key("abcdefghijkl", "revoked"),
        ] {
            let status = refusal(&failure);
            assert_eq!(status.code(), tonic::Code::Unauthenticated);
            assert_eq!(status.message(), "missing or invalid credentials");
        }
    }
}
