//! The flags of `--auth jwt`.

use clap::Args;
use jsonwebtoken::Algorithm;

use crate::auth::jwt::{ALLOWED, JwtSettings};

#[derive(Debug, Clone, Args)]
pub struct JwtArgs {
    /// With --auth jwt: the issuer tokens must name (`iss`), e.g.
    /// https://login.example.com/realms/acme.
    #[arg(long, env = "TASKSTORE_JWT_ISSUER")]
    pub jwt_issuer: Option<String>,
    /// With --auth jwt: the audience tokens must name (`aud`).
    #[arg(long, env = "TASKSTORE_JWT_AUDIENCE")]
    pub jwt_audience: Option<String>,
    /// With --auth jwt: where the issuer publishes its keys (a JWKS), e.g.
    /// https://login.example.com/realms/acme/protocol/openid-connect/certs.
    #[arg(long, env = "TASKSTORE_JWT_JWKS_URL")]
    pub jwt_jwks_url: Option<String>,
    /// The claim naming the caller's tenant (`*`: every tenant).
    #[arg(long, env = "TASKSTORE_JWT_TENANT_CLAIM", default_value = "tenant")]
    pub jwt_tenant_claim: String,
    /// The claim naming the caller's role (client, worker, admin or viewer).
    #[arg(long, env = "TASKSTORE_JWT_ROLE_CLAIM", default_value = "role")]
    pub jwt_role_claim: String,
    /// The signing algorithms accepted, comma-separated (asymmetric only).
    #[arg(
        long,
        env = "TASKSTORE_JWT_ALGORITHMS",
        value_delimiter = ',',
        default_value = "RS256,ES256"
    )]
    pub jwt_algorithms: Vec<String>,
}

impl JwtArgs {
    /// The JWT settings, when the issuer, audience and JWKS are given.
    pub fn settings(&self) -> Result<Option<JwtSettings>, String> {
        let (issuer, audience, jwks_url) =
            match (&self.jwt_issuer, &self.jwt_audience, &self.jwt_jwks_url) {
                (None, None, None) => return Ok(None),
                (Some(issuer), Some(audience), Some(url)) => (issuer, audience, url),
                _ => {
                    return Err(
                        "--jwt-issuer, --jwt-audience and --jwt-jwks-url go together".to_owned(),
                    );
                }
            };
        if !(jwks_url.starts_with("https://") || jwks_url.starts_with("http://")) {
            return Err("--jwt-jwks-url must be an http(s) URL".to_owned());
        }
        let algorithms = self
            .jwt_algorithms
            .iter()
            .map(|name| {
                name.trim()
                    .parse::<Algorithm>()
                    .ok()
                    .filter(|alg| ALLOWED.contains(alg))
                    .ok_or_else(|| format!("--jwt-algorithms: {name:?} is not one of {ALLOWED:?}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Some(JwtSettings {
            issuer: issuer.clone(),
            audience: audience.clone(),
            jwks_url: jwks_url.clone(),
            tenant_claim: self.jwt_tenant_claim.clone(),
            role_claim: self.jwt_role_claim.clone(),
            algorithms,
        }))
    }
}
