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
