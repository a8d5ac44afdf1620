//! The one way our clients (the CLI, workers, the load generator) read a
//! service address, so each accepts the same forms and explains a bad one
//! the same way.

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// Why an address was refused; says what to write instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid endpoint {raw:?}: {reason}; write it as http://HOST:PORT (e.g. http://127.0.0.1:50051)"
)]
pub struct InvalidEndpoint {
    pub raw: String,
    pub reason: String,
}

/// Parses `http://host:port`, `https://host:port`, or a bare `host:port`
/// (as grpcurl takes it), which means plaintext `http://`.
pub fn parse_endpoint(raw: &str) -> Result<Endpoint, InvalidEndpoint> {
    let invalid = |reason: &str| InvalidEndpoint {
        raw: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let raw = raw.trim();
    if raw.is_empty() {
        return Err(invalid("it is empty"));
    }
    let url = match raw.split_once("://") {
        Some(("http" | "https", _)) => raw.to_owned(),
        Some((scheme, _)) => {
            return Err(invalid(&format!(
                "the scheme {scheme}:// is not supported (use http:// or https://)"
            )));
        }
        None => format!("http://{raw}"),
    };
    let endpoint = Endpoint::from_shared(url).map_err(|_| invalid("it is not a valid address"))?;
    if endpoint.uri().port_u16().is_none() {
        return Err(invalid("it has no port"));
    }
    Ok(endpoint)
}

/// How a client speaks TLS to an `https://` endpoint: which authorities it
/// trusts (Mozilla's roots unless a CA is given) and, for mTLS, the
/// certificate and key it presents.
#[derive(Clone, Default)]
pub struct ClientTls {
    pub ca_pem: Option<Vec<u8>>,
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls")
            .field("ca", &self.ca_pem.is_some())
            .field("identity", &self.identity.is_some())
            .finish()
    }
}

impl ClientTls {
    /// From PEM files: a CA to trust, and a certificate with its key.
    pub fn from_files(
        ca: Option<&std::path::Path>,
        cert: Option<&std::path::Path>,
        key: Option<&std::path::Path>,
    ) -> Result<Self, String> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|err| format!("cannot read {}: {err}", path.display()))
        };
        let identity = match (cert, key) {
            (Some(cert), Some(key)) => Some((read(cert)?, read(key)?)),
            (None, None) => None,
            _ => {
                return Err(
                    "a client certificate needs its key, and a key its certificate".to_owned(),
                );
            }
        };
        Ok(Self {
            ca_pem: ca.map(read).transpose()?,
            identity,
        })
    }

    fn is_set(&self) -> bool {
        self.ca_pem.is_some() || self.identity.is_some()
    }
}

/// [`parse_endpoint`], with TLS for `https://` endpoints.
pub fn parse_secure_endpoint(raw: &str, tls: &ClientTls) -> Result<Endpoint, InvalidEndpoint> {
    let endpoint = parse_endpoint(raw)?;
    let invalid = |reason: String| InvalidEndpoint {
        raw: raw.to_owned(),
        reason,
    };
    if endpoint.uri().scheme_str() != Some("https") {
        if tls.is_set() {
            return Err(invalid(
                "TLS settings (a CA, a client certificate) need an https:// endpoint".to_owned(),
            ));
        }
        return Ok(endpoint);
    }
    let mut config = ClientTlsConfig::new();
    config = match &tls.ca_pem {
        Some(ca) => config.ca_certificate(Certificate::from_pem(ca)),
        None => config.with_webpki_roots(),
    };
    if let Some((cert, key)) = &tls.identity {
        config = config.identity(Identity::from_pem(cert, key));
    }
    endpoint
        .tls_config(config)
        .map_err(|err| invalid(format!("TLS cannot be set up: {}", root_cause(&err))))
}

/// The innermost cause of an error, which is where the useful words are
/// (tonic's own message is a bare "transport error").
pub fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = err;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Whether `status` came from something that is not a gRPC server: an
/// HTTP server that answered with an HTTP status and no `grpc-status` (the
/// service's MCP or dashboard port, a web server, a proxy's error page).
/// tonic maps such answers to codes (HTTP 404 is UNIMPLEMENTED) but says
/// so in its message, which a real gRPC status never does.
pub fn answered_by_no_grpc_service(status: &tonic::Status) -> bool {
    let message = status.message();
    message.starts_with("grpc-status header missing")
        || message.starts_with("protocol error: missing grpc-status")
}

/// What to do about an endpoint that is not the taskstore gRPC API.
pub const NOT_THE_GRPC_API: &str = "the address answers, but not as the taskstore gRPC API: point it at the service's gRPC port (--listen, 50051 by default), not its MCP (50052) or dashboard (50053) port";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http_answer_is_told_from_a_grpc_status() {
        let http = tonic::Status::unimplemented(
            "grpc-status header missing, mapped from HTTP status code 404",
        );
        assert!(answered_by_no_grpc_service(&http));
        let grpc = tonic::Status::unimplemented("unknown method Heartbeat");
        assert!(!answered_by_no_grpc_service(&grpc));
    }

    #[test]
    fn accepts_urls_and_bare_addresses() {
        for (raw, uri) in [
            ("http://127.0.0.1:50051", "http://127.0.0.1:50051/"),
            (
                "https://taskstore.example:443",
                "https://taskstore.example:443/",
            ),
            ("127.0.0.1:50051", "http://127.0.0.1:50051/"),
            ("localhost:7", "http://localhost:7/"),
            ("  [::1]:50051 ", "http://[::1]:50051/"),
        ] {
            let endpoint = parse_endpoint(raw).unwrap_or_else(|err| panic!("{raw}: {err}"));
            assert_eq!(endpoint.uri().to_string(), uri);
        }
    }

    #[test]
    fn refuses_what_cannot_work_and_says_how_to_write_it() {
        for raw in [
            "",
            "grpc://127.0.0.1:50051",
            "http://",
            "localhost",
            "a b:1",
            "http://h:x",
        ] {
            let err = parse_endpoint(raw).expect_err(raw).to_string();
            assert!(err.contains("http://HOST:PORT"), "{raw}: {err}");
        }
    }
}
