//! How the service's relay and every worker connect to RabbitMQ:
//! `amqp://`, or `amqps://` trusting the given CA (else the public web
//! roots) and, when the broker verifies peers, presenting a client
//! certificate. One place, so both ends accept the same settings.

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::{Connection, ConnectionProperties};

use crate::endpoint::ClientTls;

/// Connects to the broker at `url` (which carries its credentials).
pub async fn connect(url: &str, tls: &ClientTls) -> lapin::Result<Connection> {
    let config = OwnedTLSConfig {
        identity: tls
            .identity
            .as_ref()
            .map(|(pem, key)| OwnedIdentity::PKCS8 {
                pem: pem.clone(),
                key: key.clone(),
            }),
        cert_chain: tls
            .ca_pem
            .as_ref()
            .map(|pem| String::from_utf8_lossy(pem).into_owned()),
    };
    let runtime = lapin::runtime::default_runtime()?;
    Connection::connect_with_config(url, ConnectionProperties::default(), config, runtime).await
}
