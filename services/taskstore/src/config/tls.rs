//! The flags of TLS: on the gRPC port (and mTLS), and to RabbitMQ.

use std::path::PathBuf;

use clap::Args;

use taskstore_proto::endpoint::ClientTls;

use crate::auth::AuthMethod;
use crate::settings::ServerTls;

#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Serve TLS with this certificate chain (PEM); with --tls-key.
    #[arg(
        long,
        env = "TASKSTORE_TLS_CERT",
        value_name = "PATH",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        env = "TASKSTORE_TLS_KEY",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Verify client certificates against this CA (PEM); with --auth mtls
    /// a certificate names its holder (urn:taskstore:ROLE:TENANT).
    #[arg(
        long,
        env = "TASKSTORE_TLS_CLIENT_CA",
        value_name = "PATH",
        requires = "tls_cert"
    )]
    pub tls_client_ca: Option<PathBuf>,
}

fn read(path: &PathBuf) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|err| format!("cannot read {}: {err}", path.display()))
}

impl TlsArgs {
    /// The TLS of the port, checked against the authentication methods.
    pub fn settings(&self, auth: &[AuthMethod]) -> Result<Option<ServerTls>, String> {
        let mtls = auth.contains(&AuthMethod::Mtls);
        if mtls && self.tls_client_ca.is_none() {
            return Err("--auth mtls needs --tls-cert, --tls-key and --tls-client-ca".to_owned());
        }
        let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) else {
            return Ok(None);
        };
        Ok(Some(ServerTls {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
            client_ca_pem: self.tls_client_ca.as_ref().map(read).transpose()?,
            // Certificates are the only way in: refuse others at once.
            require_client_cert: mtls && auth.len() == 1,
        }))
    }
}

/// The flags of TLS to RabbitMQ (an `amqps://` URL).
#[derive(Debug, Clone, Args)]
pub struct BrokerTlsArgs {
    /// Trust this CA (PEM) for an amqps:// URL, instead of the public web
    /// roots.
    #[arg(long, env = "TASKSTORE_AMQP_CA_CERT", value_name = "PATH")]
    pub amqp_ca_cert: Option<PathBuf>,
    /// Present this certificate (PEM) to a broker that verifies peers; with
    /// --amqp-client-key.
    #[arg(
        long,
        env = "TASKSTORE_AMQP_CLIENT_CERT",
        value_name = "PATH",
        requires = "amqp_client_key"
    )]
    pub amqp_client_cert: Option<PathBuf>,
    /// The private key of --amqp-client-cert (PEM).
    #[arg(
        long,
        env = "TASKSTORE_AMQP_CLIENT_KEY",
        value_name = "PATH",
        requires = "amqp_client_cert"
    )]
    pub amqp_client_key: Option<PathBuf>,
}

impl BrokerTlsArgs {
    pub fn settings(&self) -> Result<ClientTls, String> {
        ClientTls::from_files(
            self.amqp_ca_cert.as_deref(),
            self.amqp_client_cert.as_deref(),
            self.amqp_client_key.as_deref(),
        )
    }
}
