//! JWTs from an OIDC issuer: verified against the issuer's JWKS (fetched,
//! cached, and fetched again when a token names a key id not in the cache,
//! as after the issuer rotates its keys), checking `iss`, `aud`, `exp` and
//! `nbf` with a small leeway, and the algorithm against an allow-list of
//! asymmetric ones (so never `none`, and never HMAC with a public key as
//! its secret). The tenant and role come from configurable claims.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use tokio::sync::RwLock;

use super::AuthFailure;
use crate::domain::{Caller, Reach, Role};

/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY: Duration = Duration::from_secs(30);
/// Fetch the JWKS again at most this often for unknown key ids (a flood of
/// tokens with made-up ids must not become a flood of fetches).
const MIN_REFETCH: Duration = Duration::from_secs(3);
/// And at least this often anyway (removed keys stop working).
const MAX_AGE: Duration = Duration::from_secs(3600);
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// A JWKS larger than this is refused.
const MAX_JWKS_BYTES: usize = 256 * 1024;

/// The asymmetric algorithms a token may use.
pub const ALLOWED: [Algorithm; 8] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
];

/// How to verify tokens (`serve --jwt-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtSettings {
    pub issuer: String,
    pub audience: String,
    pub jwks_url: String,
    pub tenant_claim: String,
    pub role_claim: String,
    pub algorithms: Vec<Algorithm>,
}

/// A token verified: who it stands for, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub caller: Caller,
    /// The token's `exp` (Unix seconds).
    pub expires_at: i64,
}

/// Verifies tokens of one issuer.
#[derive(Debug)]
pub struct JwtVerifier {
    settings: JwtSettings,
    http: reqwest::Client,
    keys: RwLock<KeyCache>,
}

#[derive(Default)]
struct KeyCache {
    keys: HashMap<String, DecodingKey>,
    fetched: Option<Instant>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCache")
            .field("key_ids", &self.keys.keys().collect::<Vec<_>>())
            .field("fetched", &self.fetched)
            .finish()
    }
}

/// Whether `token` has the shape of a JWT (three base64url parts).
pub fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

impl JwtVerifier {
    pub fn new(settings: JwtSettings) -> Result<Self, String> {
        if settings.algorithms.is_empty()
            || settings.algorithms.iter().any(|alg| !ALLOWED.contains(alg))
        {
            return Err(format!(
                "--jwt-algorithms must be among {ALLOWED:?} (no none, no HMAC)"
            ));
        }
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .map_err(|err| format!("cannot build the JWKS client: {err}"))?;
        Ok(Self {
            settings,
            http,
            keys: RwLock::new(KeyCache::default()),
        })
    }

    pub async fn authenticate(&self, token: &str) -> Result<Caller, AuthFailure> {
        self.verify(token).await.map(|verified| verified.caller)
    }

    /// The issuer this verifier trusts (`iss`).
    pub fn issuer(&self) -> &str {
        &self.settings.issuer
    }

    /// The caller `token` stands for, and until when (its `exp`).
    pub async fn verify(&self, token: &str) -> Result<Verified, AuthFailure> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| AuthFailure::invalid("malformed token"))?;
        if !self.settings.algorithms.contains(&header.alg) {
            return Err(AuthFailure::invalid(
                "token signed with an algorithm not allowed",
            ));
        }
        let kid = header
            .kid
            .ok_or(AuthFailure::invalid("token without a key id (kid)"))?;
        let key = self.key(&kid).await?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.settings.issuer]);
        validation.set_audience(&[&self.settings.audience]);
        validation.leeway = LEEWAY.as_secs();
        validation.validate_nbf = true;
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let claims = jsonwebtoken::decode::<serde_json::Map<String, serde_json::Value>>(
            token,
            &key,
            &validation,
        )
        .map_err(|_| AuthFailure::invalid("token signature, issuer, audience or time not valid"))?
        .claims;
        let expires_at = claims
            .get("exp")
            .and_then(serde_json::Value::as_i64)
            .ok_or(AuthFailure::invalid("token without a numeric exp"))?;
        Ok(Verified {
            caller: self.caller(&claims)?,
            expires_at,
        })
    }

    fn caller(
        &self,
        claims: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Caller, AuthFailure> {
        let text = |name: &str| claims.get(name).and_then(|v| v.as_str());
        let role = text(&self.settings.role_claim)
            .and_then(|raw| Role::parse(raw).ok())
            .ok_or(AuthFailure::invalid("token without a valid role claim"))?;
        let reach = text(&self.settings.tenant_claim)
            .and_then(|raw| Reach::parse(raw).ok())
            .ok_or(AuthFailure::invalid("token without a valid tenant claim"))?;
        // As with keys: a client acts in one tenant.
        if role == Role::Client && reach == Reach::AllTenants {
            return Err(AuthFailure::invalid("a client token of every tenant"));
        }
        let subject = text("sub").unwrap_or_default();
        Ok(Caller {
            subject: format!("jwt:{}", subject.chars().take(128).collect::<String>()),
            role,
            reach,
        })
    }

    /// The key `kid`, fetching the JWKS when it is unknown (at most every
    /// few seconds) or the cache is old.
    async fn key(&self, kid: &str) -> Result<DecodingKey, AuthFailure> {
        {
            let cache = self.keys.read().await;
            let fresh = cache.fetched.is_some_and(|at| at.elapsed() < MAX_AGE);
            if fresh && let Some(key) = cache.keys.get(kid) {
                return Ok(key.clone());
            }
        }
        let mut cache = self.keys.write().await;
        let may_fetch = cache.fetched.is_none_or(|at| at.elapsed() >= MIN_REFETCH);
        if may_fetch {
            match self.fetch().await {
                Ok(keys) => {
                    cache.keys = keys;
                    cache.fetched = Some(Instant::now());
                }
                Err(err) => {
                    tracing::warn!(error = %err, url = %self.settings.jwks_url, "the JWKS could not be fetched");
                    if !cache.keys.contains_key(kid) {
                        return Err(AuthFailure::Unavailable(err));
                    }
                }
            }
        }
        cache.keys.get(kid).cloned().ok_or(AuthFailure::invalid(
            "token signed by a key the issuer does not publish",
        ))
    }

    async fn fetch(&self) -> Result<HashMap<String, DecodingKey>, String> {
        let response = self
            .http
            .get(&self.settings.jwks_url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|err| err.without_url().to_string())?;
        if response
            .content_length()
            .is_some_and(|len| len > MAX_JWKS_BYTES as u64)
        {
            return Err("the JWKS is too large".to_owned());
        }
        let body = response.bytes().await.map_err(|err| err.to_string())?;
        if body.len() > MAX_JWKS_BYTES {
            return Err("the JWKS is too large".to_owned());
        }
        let set: JwkSet =
            serde_json::from_slice(&body).map_err(|err| format!("not a JWKS: {err}"))?;
        let mut keys = HashMap::new();
        for jwk in set.keys {
            // Symmetric keys have no place in a public key set.
            if matches!(jwk.algorithm, AlgorithmParameters::OctetKey(_)) {
                continue;
            }
            let (Some(kid), Ok(key)) = (jwk.common.key_id.clone(), DecodingKey::from_jwk(&jwk))
            else {
                continue;
            };
            keys.insert(kid, key);
        }
        Ok(keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_asymmetric_algorithms_may_be_configured() {
        let settings = |algorithms| JwtSettings {
            issuer: "https://issuer".into(),
            audience: "taskstore".into(),
            jwks_url: "https://issuer/jwks".into(),
            tenant_claim: "tenant".into(),
            role_claim: "role".into(),
            algorithms,
        };
        assert!(JwtVerifier::new(settings(vec![Algorithm::ES256])).is_ok());
        assert!(JwtVerifier::new(settings(vec![Algorithm::HS256])).is_err());
        assert!(JwtVerifier::new(settings(Vec::new())).is_err());
    }

    #[test]
    fn jwts_are_told_from_keys() {
        assert!(looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln"));
        assert!(!looks_like_jwt("tsk_abcdefghijkl_secret"));
        assert!(!looks_like_jwt("eyJ.only-two"));
    }
}
