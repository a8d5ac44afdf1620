//! Single sign-on for the dashboard: the OAuth 2.0 authorization code flow
//! with PKCE (RFC 7636, S256) against the OIDC issuer `--auth jwt` already
//! trusts. This module is the client side: the issuer's endpoints (from its
//! discovery document, fetched once and kept), the authorization URL, and
//! the code exchanged for tokens. The browser's side of the flow is
//! `dashboard/sign_in.rs`.
//!
//! The token that logs in is the access token, verified by the same
//! [`JwtVerifier`] as every gRPC and MCP call: a browser may do what that
//! token could do through the API, and the role and tenant come from the
//! same claims. (The ID token is for the client's audience and carries no
//! rights here; the code is bound to this browser's flow by PKCE and the
//! state, so no nonce is needed to tie the tokens to it.)
//!
//! [`JwtVerifier`]: crate::auth::jwt::JwtVerifier

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::sync::OnceCell;

/// How long a call to the issuer may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// A discovery document or token response larger than this is refused.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Where the issuer's endpoints are published, under its URL.
const DISCOVERY_PATH: &str = "/.well-known/openid-configuration";
/// Where the issuer sends the browser back to, under the public URL.
pub const CALLBACK_PATH: &str = "/login/oidc/callback";

/// The confidential client's secret, if the issuer gave one: never printed.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientSecret(String);

impl ClientSecret {
    pub fn new(secret: String) -> Self {
        Self(secret)
    }
}

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(<redacted>)")
    }
}

/// The dashboard as an OAuth client of the issuer (`--dashboard-oidc-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    /// The client id the issuer registered the dashboard under.
    pub client_id: String,
    pub client_secret: Option<ClientSecret>,
    /// The dashboard's address as browsers reach it (scheme, host, base
    /// path), e.g. `https://ops.example.com/tasks`; the callback is under
    /// it, and must be registered with the issuer as a redirect URI.
    pub public_url: String,
    /// The scopes asked for, space-separated (`openid` at least).
    pub scopes: String,
}

impl OidcSettings {
    /// The redirect URI the issuer sends the browser back to.
    pub fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.public_url.trim_end_matches('/'))
    }

    /// A public URL or issuer checked: https, or http to a loopback host
    /// (tests and a local issuer); no query, fragment or user info.
    pub fn check_url(what: &str, raw: &str) -> Result<String, String> {
        let refused = || {
            format!(
                "{what} {raw:?} must be an https URL (http only to localhost or 127.0.0.1), without query or fragment"
            )
        };
        let rest = if let Some(rest) = raw.strip_prefix("https://") {
            rest
        } else if let Some(rest) = raw.strip_prefix("http://") {
            let host = match rest.strip_prefix('[') {
                Some(v6) => v6.split(']').next().map(|inner| format!("[{inner}]")),
                None => rest.split(['/', ':']).next().map(str::to_owned),
            };
            if !host
                .is_some_and(|host| matches!(host.as_str(), "localhost" | "127.0.0.1" | "[::1]"))
            {
                return Err(refused());
            }
            rest
        } else {
            return Err(refused());
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty()
            || authority.contains('@')
            || raw.contains(['?', '#', ' ', '"', '<', '>'])
        {
            return Err(refused());
        }
        Ok(raw.trim_end_matches('/').to_owned())
    }
}

/// A random string for a flow's state and PKCE verifier (32 bytes of the
/// OS's randomness, base64url: 43 characters, as RFC 7636 asks).
pub fn random_token() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// The S256 code challenge of a PKCE verifier.
pub fn code_challenge(verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

/// The issuer's endpoints, from its discovery document.
#[derive(Debug, Clone, Deserialize)]
struct Endpoints {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
}

#[derive(Deserialize)]
struct TokenResponse {
    access_token: String,
}

/// Why a login through the issuer did not happen.
#[derive(Debug, thiserror::Error)]
pub enum OidcFailure {
    /// The issuer cannot be reached or answered nonsense: try again later.
    #[error("the identity provider cannot be reached: {0}")]
    Unavailable(String),
    /// The issuer refused the code (expired, used, or not this flow's).
    #[error("the identity provider refused the login: {0}")]
    Refused(String),
}

/// The dashboard's client of the issuer.
#[derive(Debug)]
pub struct OidcClient {
    settings: OidcSettings,
    issuer: String,
    http: reqwest::Client,
    endpoints: OnceCell<Endpoints>,
}

impl OidcClient {
    /// A client of `issuer` (the one `--jwt-issuer` names).
    pub fn new(settings: OidcSettings, issuer: &str) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            // The token endpoint answers directly; a redirect is not
            // followed with the code and verifier in it.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| format!("cannot build the OIDC client: {err}"))?;
        Ok(Self {
            settings,
            issuer: issuer.trim_end_matches('/').to_owned(),
            http,
            endpoints: OnceCell::new(),
        })
    }

    /// Where to send the browser to log in, for a flow with `state` and
    /// the PKCE `verifier`.
    pub async fn authorization_url(
        &self,
        state: &str,
        verifier: &str,
    ) -> Result<String, OidcFailure> {
        let endpoints = self.endpoints().await?;
        let query = serde_urlencoded::to_string([
            ("response_type", "code"),
            ("client_id", self.settings.client_id.as_str()),
            ("redirect_uri", self.settings.redirect_uri().as_str()),
            ("scope", self.settings.scopes.as_str()),
            ("state", state),
            ("code_challenge", code_challenge(verifier).as_str()),
            ("code_challenge_method", "S256"),
        ])
        .map_err(|err| OidcFailure::Unavailable(err.to_string()))?;
        let joint = if endpoints.authorization_endpoint.contains('?') {
            '&'
        } else {
            '?'
        };
        Ok(format!(
            "{}{joint}{query}",
            endpoints.authorization_endpoint
        ))
    }

    /// The access token the issuer gives for `code` and its `verifier`.
    pub async fn exchange(&self, code: &str, verifier: &str) -> Result<String, OidcFailure> {
        let endpoints = self.endpoints().await?;
        let redirect_uri = self.settings.redirect_uri();
        let mut form = vec![
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri.as_str()),
            ("code_verifier", verifier),
        ];
        let mut request = self.http.post(&endpoints.token_endpoint);
        match &self.settings.client_secret {
            // client_secret_basic, the method every issuer supports.
            Some(ClientSecret(secret)) => {
                request = request.basic_auth(&self.settings.client_id, Some(secret));
            }
            None => form.push(("client_id", self.settings.client_id.as_str())),
        }
        let response = request
            .header("accept", "application/json")
            .form(&form)
            .send()
            .await
            .map_err(|err| OidcFailure::Unavailable(err.without_url().to_string()))?;
        let status = response.status();
        let body = limited_body(response).await?;
        if status.is_client_error() {
            #[derive(Deserialize)]
            struct ErrorResponse {
                error: String,
            }
            let code = serde_json::from_slice::<ErrorResponse>(&body)
                .map(|err| err.error)
                .unwrap_or_else(|_| status.to_string());
            return Err(OidcFailure::Refused(printable(&code)));
        }
        if !status.is_success() {
            return Err(OidcFailure::Unavailable(format!(
                "the token endpoint answered {status}"
            )));
        }
        serde_json::from_slice::<TokenResponse>(&body)
            .map(|tokens| tokens.access_token)
            .map_err(|_| {
                OidcFailure::Unavailable("a token response without an access token".into())
            })
    }

    /// The issuer's endpoints: fetched once, again after a failure.
    async fn endpoints(&self) -> Result<&Endpoints, OidcFailure> {
        self.endpoints
            .get_or_try_init(|| self.discover())
            .await
            .inspect_err(
                |err| tracing::warn!(error = %err, issuer = %self.issuer, "oidc discovery failed"),
            )
    }

    async fn discover(&self) -> Result<Endpoints, OidcFailure> {
        let url = format!("{}{DISCOVERY_PATH}", self.issuer);
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(|err| OidcFailure::Unavailable(err.without_url().to_string()))?;
        let body = limited_body(response).await?;
        let endpoints: Endpoints = serde_json::from_slice(&body)
            .map_err(|err| OidcFailure::Unavailable(format!("not a discovery document: {err}")))?;
        // A document naming another issuer is not this issuer's (OIDC
        // Discovery 1.0, section 4.3).
        if endpoints.issuer.trim_end_matches('/') != self.issuer {
            return Err(OidcFailure::Unavailable(format!(
                "the discovery document names issuer {:?}, not {:?}",
                printable(&endpoints.issuer),
                self.issuer
            )));
        }
        for endpoint in [&endpoints.authorization_endpoint, &endpoints.token_endpoint] {
            let without_query = endpoint.split('?').next().unwrap_or_default();
            OidcSettings::check_url("an endpoint of the issuer", without_query)
                .map_err(OidcFailure::Unavailable)?;
        }
        Ok(endpoints)
    }
}

async fn limited_body(response: reqwest::Response) -> Result<Vec<u8>, OidcFailure> {
    if response
        .content_length()
        .is_some_and(|len| len > MAX_RESPONSE_BYTES as u64)
    {
        return Err(OidcFailure::Unavailable("its answer is too large".into()));
    }
    let body = response
        .bytes()
        .await
        .map_err(|err| OidcFailure::Unavailable(err.without_url().to_string()))?;
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(OidcFailure::Unavailable("its answer is too large".into()));
    }
    Ok(body.to_vec())
}

/// Text from the issuer (or a browser) cut to what may be shown and
/// logged: at most 64 printable ASCII characters.
pub fn printable(raw: &str) -> String {
    raw.chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636s_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let token = random_token().expect("random");
        assert_eq!(token.len(), 43);
        assert_ne!(token, random_token().expect("random"));
    }

    #[test]
    fn urls_are_https_or_loopback_http() {
        for good in [
            "https://ops.example.com/tasks/",
            "http://127.0.0.1:50053",
            "http://localhost:8080/x",
            "http://[::1]:1/",
        ] {
            assert!(OidcSettings::check_url("url", good).is_ok(), "{good}");
        }
        assert_eq!(
            OidcSettings::check_url("url", "https://a.example/t/").as_deref(),
            Ok("https://a.example/t")
        );
        for bad in [
            "http://ops.example.com",
            "ftp://a",
            "https://",
            "https://u:p@a.example",
            "https://a.example/?x=1",
            "https://a.example/#f",
            "http://127.0.0.1.evil.example/",
            "javascript:alert(1)",
            "http://[::2]:1/",
        ] {
            assert!(OidcSettings::check_url("url", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_redirect_uri_is_under_the_public_url() {
        let settings = OidcSettings {
            client_id: "dashboard".into(),
            client_secret: Some(ClientSecret::new("s3cret".into())),
            public_url: "https://ops.example.com/tasks".into(),
            scopes: "openid".into(),
        };
        assert_eq!(
            settings.redirect_uri(),
            "https://ops.example.com/tasks/login/oidc/callback"
        );
        assert!(!format!("{settings:?}").contains("s3cret"));
    }

    #[test]
    fn text_from_outside_is_cut_to_printable_ascii() {
        assert_eq!(
            printable("access_denied\n<script>é"),
            "access_denied<script>"
        );
        assert_eq!(printable(&"x".repeat(500)).len(), 64);
    }
}
