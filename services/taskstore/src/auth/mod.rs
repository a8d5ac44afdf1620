//! Authentication: who a request comes from. Each configured method reads
//! the request's credentials (`authorization: Bearer …`) and, when they are
//! its kind, says who the caller is or refuses them. The gRPC layer
//! (`grpc::authenticate`) runs this before any handler, and checks the
//! caller's rights there too.

pub mod api_keys;
pub mod jwt;
pub mod mtls;
pub mod oidc;

use std::sync::Arc;

use base64::Engine as _;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use taskstore_proto::credentials::BearerToken;

use self::api_keys::ApiKeys;
use self::jwt::{JwtSettings, JwtVerifier};
use crate::domain::{Caller, Reach, Role};
use crate::store::keys::KeyStore;

/// The embedded workers' tokens start so (API keys with `tsk_`).
const EMBEDDED_PREFIX: &str = "tsi_";

/// How callers may authenticate (`serve --auth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum AuthMethod {
    /// API keys made by `taskstore keys create`.
    ApiKeys,
    /// JWTs from an OIDC issuer (`--jwt-*`).
    Jwt,
    /// Client certificates (`--tls-client-ca`), naming `urn:taskstore:<role>:<tenant>`.
    Mtls,
    /// No authentication: every caller may do everything in every tenant.
    None,
}

/// Why a request was not authenticated. The caller learns only
/// UNAUTHENTICATED (or UNAVAILABLE); the reason is for the server log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No credentials.
    Missing,
    /// Credentials no method accepts: unknown, malformed, revoked, expired.
    Invalid(Rejection),
    /// The credentials could not be checked now (the key store is down).
    Unavailable(String),
}

/// What was wrong with refused credentials, for the server's log (an
/// operator rotating a key watches its refusals stop): never a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// The credential, when it names itself: `key:<id>` of an API key.
    pub credential: Option<String>,
    /// `revoked`, `unknown key`, `wrong secret`, `expired or not valid`…
    pub reason: &'static str,
}

impl AuthFailure {
    /// Refused for `reason`, naming no credential.
    pub fn invalid(reason: &'static str) -> Self {
        AuthFailure::Invalid(Rejection {
            credential: None,
            reason,
        })
    }

    /// Refused for `reason`: the API key `key_id`.
    pub fn invalid_key(key_id: &str, reason: &'static str) -> Self {
        AuthFailure::Invalid(Rejection {
            credential: Some(format!("key:{key_id}")),
            reason,
        })
    }

    /// The credential this failure is about, when it names one.
    pub fn credential(&self) -> Option<&str> {
        match self {
            AuthFailure::Invalid(rejection) => rejection.credential.as_deref(),
            AuthFailure::Missing | AuthFailure::Unavailable(_) => None,
        }
    }

    /// Why, in a few words, for the log.
    pub fn reason(&self) -> &str {
        match self {
            AuthFailure::Missing => "no credentials",
            AuthFailure::Invalid(rejection) => rejection.reason,
            AuthFailure::Unavailable(_) => "credentials cannot be checked now",
        }
    }
}

/// The token of an `authorization: Bearer <token>` header: how callers
/// present API keys and JWTs, on the gRPC port and on the MCP endpoint.
pub fn bearer_token(headers: &http::HeaderMap) -> Option<&str> {
    let value = headers.get(http::header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// The configured methods.
#[derive(Clone)]
pub enum Authenticator {
    /// `--auth none`: everyone is [`Caller::unauthenticated`].
    Off,
    On {
        api_keys: Option<Arc<ApiKeys>>,
        jwt: Option<Arc<JwtVerifier>>,
        /// Whether a verified client certificate identifies its holder.
        mtls: bool,
        /// The digest of the token this process gave its embedded workers
        /// (never stored, gone with the process).
        embedded: Option<[u8; 32]>,
    },
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Authenticator::Off => f.write_str("Authenticator::Off"),
            Authenticator::On {
                api_keys,
                jwt,
                mtls,
                embedded,
            } => f
                .debug_struct("Authenticator::On")
                .field("api_keys", &api_keys.is_some())
                .field("jwt", &jwt.is_some())
                .field("mtls", mtls)
                .field("embedded", &embedded.is_some())
                .finish(),
        }
    }
}

impl Authenticator {
    /// The authenticator for `methods`; `keys` is where API keys live,
    /// `jwt` how to verify tokens (required with [`AuthMethod::Jwt`]).
    pub fn new(
        methods: &[AuthMethod],
        keys: Arc<dyn KeyStore>,
        jwt: Option<&JwtSettings>,
    ) -> Result<Self, String> {
        if methods.contains(&AuthMethod::None) {
            return Ok(Authenticator::Off);
        }
        let jwt = match (methods.contains(&AuthMethod::Jwt), jwt) {
            (true, Some(settings)) => Some(Arc::new(JwtVerifier::new(settings.clone())?)),
            (true, None) => {
                return Err(
                    "--auth jwt needs --jwt-issuer, --jwt-audience and --jwt-jwks-url".to_owned(),
                );
            }
            (false, _) => None,
        };
        Ok(Authenticator::On {
            api_keys: methods
                .contains(&AuthMethod::ApiKeys)
                .then(|| Arc::new(ApiKeys::new(keys))),
            jwt,
            mtls: methods.contains(&AuthMethod::Mtls),
            embedded: None,
        })
    }

    /// The API keys checked, when they are one of the methods.
    pub fn api_keys(&self) -> Option<&Arc<ApiKeys>> {
        match self {
            Authenticator::On { api_keys, .. } => api_keys.as_ref(),
            Authenticator::Off => None,
        }
    }

    /// The JWT verifier, when tokens of an issuer are one of the methods.
    pub fn jwt(&self) -> Option<&Arc<JwtVerifier>> {
        match self {
            Authenticator::On { jwt, .. } => jwt.as_ref(),
            Authenticator::Off => None,
        }
    }

    /// Credentials for this process's embedded workers: a fleet worker
    /// token made now, known only to this process. None needed when
    /// authentication is off.
    pub fn embedded_worker_token(&mut self) -> Result<BearerToken, getrandom::Error> {
        let Authenticator::On { embedded, .. } = self else {
            return Ok(BearerToken::none());
        };
        let mut secret = [0u8; 32];
        getrandom::getrandom(&mut secret)?;
        let token = format!(
            "{EMBEDDED_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
        );
        *embedded = Some(Sha256::digest(token.as_bytes()).into());
        BearerToken::new(&token).map_err(|_| getrandom::Error::UNEXPECTED)
    }

    /// The caller presenting `bearer` (the token of an `authorization:
    /// Bearer` header, if any) on a connection whose verified client
    /// certificate is `certificate` (DER), if any. A certificate that names
    /// a caller wins; else the token decides.
    pub async fn authenticate(
        &self,
        bearer: Option<&str>,
        certificate: Option<&[u8]>,
    ) -> Result<Caller, AuthFailure> {
        let (api_keys, jwt, mtls, embedded) = match self {
            Authenticator::Off => return Ok(Caller::unauthenticated()),
            Authenticator::On {
                api_keys,
                jwt,
                mtls,
                embedded,
            } => (api_keys, jwt, *mtls, embedded),
        };
        if mtls && let Some(der) = certificate {
            match (mtls::caller_of_certificate(der), bearer) {
                (Ok(caller), _) => return Ok(caller),
                (Err(failure), None) => return Err(failure),
                (Err(_), Some(_)) => {}
            }
        }
        let token = bearer.ok_or(AuthFailure::Missing)?;
        if let (Some(digest), true) = (embedded, token.starts_with(EMBEDDED_PREFIX)) {
            let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
            let matches: bool = digest.ct_eq(&presented).into();
            return if matches {
                Ok(Caller {
                    subject: "embedded-worker".to_owned(),
                    role: Role::Worker,
                    reach: Reach::AllTenants,
                })
            } else {
                Err(AuthFailure::invalid(
                    "not this process's embedded worker token",
                ))
            };
        }
        match (api_keys, jwt) {
            (Some(keys), _) if api_keys::looks_like_key(token) => keys.authenticate(token).await,
            (_, Some(jwt)) if jwt::looks_like_jwt(token) => jwt.authenticate(token).await,
            _ => Err(AuthFailure::invalid(
                "not a credential of a configured method",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_read_from_the_authorization_header() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(bearer_token(&headers), None);
        headers.insert(
            http::header::AUTHORIZATION,
            "Bearer abc".parse().expect("value"),
        );
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(
            http::header::AUTHORIZATION,
            "bearer  abc ".parse().expect("value"),
        );
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(
            http::header::AUTHORIZATION,
            "Basic abc".parse().expect("value"),
        );
        assert_eq!(bearer_token(&headers), None);
    }
}
