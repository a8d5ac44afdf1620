//! mTLS: a client certificate, verified by the TLS handshake against
//! `--tls-client-ca`, names its holder with a URI subject alternative name
//! `urn:taskstore:<role>:<tenant>` (`*` for every tenant), e.g.
//! `urn:taskstore:worker:*`, `urn:taskstore:client:acme`.

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use super::AuthFailure;
use crate::domain::{Caller, Reach, Role};

const URI_PREFIX: &str = "urn:taskstore:";

/// The caller a verified client certificate (DER) names.
pub fn caller_of_certificate(der: &[u8]) -> Result<Caller, AuthFailure> {
    let (_, certificate) = X509Certificate::from_der(der)
        .map_err(|_| AuthFailure::invalid("malformed certificate"))?;
    let names = certificate
        .subject_alternative_name()
        .map_err(|_| AuthFailure::invalid("malformed certificate names"))?
        .ok_or(AuthFailure::invalid(
            "certificate names no taskstore identity",
        ))?;
    let mut ours = names
        .value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::URI(uri) => uri.strip_prefix(URI_PREFIX),
            _ => None,
        });
    let (Some(named), None) = (ours.next(), ours.next()) else {
        // None, or several: ambiguous.
        return Err(AuthFailure::invalid(
            "certificate names no taskstore identity, or several",
        ));
    };
    let malformed = || AuthFailure::invalid("certificate names a malformed identity");
    let (role, tenant) = named.split_once(':').ok_or_else(malformed)?;
    let role = Role::parse(role).map_err(|_| malformed())?;
    let reach = Reach::parse(tenant).map_err(|_| malformed())?;
    if role == Role::Client && reach == Reach::AllTenants {
        return Err(AuthFailure::invalid("a client identity of every tenant"));
    }
    Ok(Caller {
        subject: format!("cert:{URI_PREFIX}{named}"),
        role,
        reach,
    })
}
