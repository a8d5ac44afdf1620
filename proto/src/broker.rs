//! How the service's relay and every worker connect to RabbitMQ:
//! `amqp://`, or `amqps://` trusting the given CA (else the public web
//! roots) and, when the broker verifies peers, presenting a client
//! certificate. One place, so both ends accept the same settings.
//!
//! A cluster is given as several URLs separated by commas (one per node;
//! a comma inside a password is written `%2C`). Each connection tries them
//! in turn, starting one further along than the last attempt of this
//! process, so a reconnect after a node went away goes to the next node
//! first, and replicas spread over the nodes.

use std::sync::atomic::{AtomicUsize, Ordering};

use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::{Connection, ConnectionProperties};

use crate::endpoint::ClientTls;

/// Where this process's next connection attempt starts in the list.
static NEXT_ADDRESS: AtomicUsize = AtomicUsize::new(0);

/// The broker addresses in `urls` (comma-separated), in order.
pub fn addresses(urls: &str) -> Vec<&str> {
    urls.split(',')
        .map(str::trim)
        .filter(|url| !url.is_empty())
        .collect()
}

/// Connects to one of the brokers in `urls` (each URL carries its
/// credentials), naming the connection `name` (shown by `rabbitmqctl
/// list_connections client_properties` and the management UI).
pub async fn connect(urls: &str, tls: &ClientTls, name: &str) -> lapin::Result<Connection> {
    let all = addresses(urls);
    let first = NEXT_ADDRESS.fetch_add(1, Ordering::Relaxed);
    let mut last_error = None;
    for turn in 0..all.len() {
        let index = (first + turn) % all.len();
        match connect_one(all[index], tls, name).await {
            Ok(connection) => {
                if all.len() > 1 {
                    tracing::info!(
                        node = index + 1,
                        of = all.len(),
                        "connected to a broker node"
                    );
                }
                return Ok(connection);
            }
            Err(err) => {
                if all.len() > 1 {
                    tracing::warn!(node = index + 1, of = all.len(), error = %err, "broker node unreachable; trying the next");
                }
                last_error = Some(err);
            }
        }
    }
    // An empty list is one empty URL: lapin says what is wrong with it.
    match last_error {
        Some(err) => Err(err),
        None => connect_one(urls, tls, name).await,
    }
}

async fn connect_one(url: &str, tls: &ClientTls, name: &str) -> lapin::Result<Connection> {
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
    let properties = ConnectionProperties::default().with_connection_name(name.into());
    Connection::connect_with_config(url, properties, config, runtime).await
}

/// A broker failure in the words an operator acts on: a refused login or
/// virtual host says so (no retry will fix it: the URL's credentials or
/// the broker's permissions must change); anything else as lapin says it.
pub fn describe(err: &lapin::Error) -> String {
    use lapin::protocol::{AMQPErrorKind, AMQPHardError, AMQPSoftError};
    let lapin::ErrorKind::ProtocolError(amqp) = err.kind() else {
        return err.to_string();
    };
    let said = amqp.get_message().as_str();
    match amqp.kind() {
        AMQPErrorKind::Soft(AMQPSoftError::ACCESSREFUSED) => format!(
            "RabbitMQ refused the login or an access: check the user and password in the AMQP URL and the user's permissions ({said})"
        ),
        AMQPErrorKind::Hard(AMQPHardError::NOTALLOWED) => format!(
            "RabbitMQ refused the virtual host: check the vhost in the AMQP URL and the user's permissions on it ({said})"
        ),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn several_urls_are_several_nodes() {
        assert_eq!(
            super::addresses("amqp://a:1/%2f, amqp://b:2/%2f,,amqp://c:3/%2f "),
            vec!["amqp://a:1/%2f", "amqp://b:2/%2f", "amqp://c:3/%2f"]
        );
        assert_eq!(
            super::addresses("amqp://u:p%2Cq@a/%2f"),
            vec!["amqp://u:p%2Cq@a/%2f"]
        );
    }

    use lapin::protocol::{AMQPError, AMQPErrorKind, AMQPHardError, AMQPSoftError};

    use super::describe;

    fn protocol_error(kind: AMQPErrorKind) -> lapin::Error {
        lapin::ErrorKind::ProtocolError(AMQPError::new(kind, "told by the broker".into())).into()
    }

    #[test]
    fn refused_logins_and_vhosts_are_named() {
        let login = describe(&protocol_error(AMQPErrorKind::Soft(
            AMQPSoftError::ACCESSREFUSED,
        )));
        assert!(
            login.contains("refused the login") && login.contains("told by the broker"),
            "{login}"
        );
        let vhost = describe(&protocol_error(AMQPErrorKind::Hard(
            AMQPHardError::NOTALLOWED,
        )));
        assert!(vhost.contains("virtual host"), "{vhost}");
        let other = protocol_error(AMQPErrorKind::Soft(AMQPSoftError::NOTFOUND));
        assert_eq!(describe(&other), other.to_string());
    }
}
