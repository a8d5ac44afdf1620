//! An OIDC issuer for the single sign-on tests, on a loopback port: its
//! discovery document, its JWKS (the test fixtures' key), an authorization
//! endpoint that logs in at once whoever the test chose (sending the browser
//! back with a code), and a token endpoint that checks what a real one
//! checks (the code, used once; the PKCE verifier against the challenge; the
//! redirect URI; the client and its secret) before signing an access token.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use sha2::{Digest, Sha256};

const KEY: &str = include_str!("../fixtures/jwt-es256.pem");
const JWKS: &str = include_str!("../fixtures/jwt-jwks.json");
pub const CLIENT_ID: &str = "dashboard";
pub const CLIENT_SECRET: &str = "issuer-test-secret";
pub const AUDIENCE: &str = "taskstore";

/// Who the issuer logs in next, and what its tokens say.
#[derive(Debug, Clone)]
pub struct Identity {
    pub subject: String,
    pub tenant: String,
    pub role: String,
    pub audience: String,
}

impl Identity {
    pub fn of(tenant: &str, role: &str) -> Self {
        Self {
            subject: format!("{role}@{tenant}"),
            tenant: tenant.to_owned(),
            role: role.to_owned(),
            audience: AUDIENCE.to_owned(),
        }
    }
}

#[derive(Default)]
struct Ledger {
    next: Option<Identity>,
    /// code -> (challenge, redirect uri, identity)
    codes: HashMap<String, (String, String, Identity)>,
    exchanges: usize,
}

#[derive(Clone)]
pub struct Issuer {
    pub url: String,
    ledger: Arc<Mutex<Ledger>>,
}

impl Issuer {
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the issuer");
        let addr: SocketAddr = listener.local_addr().expect("addr");
        let issuer = Self {
            url: format!("http://{addr}"),
            ledger: Arc::default(),
        };
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(|| async { JWKS }))
            .route("/authorize", get(authorize))
            .route("/token", post(token))
            .with_state(issuer.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        issuer
    }

    /// The identity the next login is for.
    pub fn log_in_next(&self, identity: Identity) {
        self.ledger.lock().expect("ledger").next = Some(identity);
    }

    pub fn exchanges(&self) -> usize {
        self.ledger.lock().expect("ledger").exchanges
    }
}

fn json(status: StatusCode, value: serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

fn decoded(raw: &[u8]) -> HashMap<String, String> {
    serde_urlencoded::from_bytes(raw).unwrap_or_default()
}

async fn discovery(State(issuer): State<Issuer>) -> Response {
    json(
        StatusCode::OK,
        serde_json::json!({
            "issuer": issuer.url,
            "authorization_endpoint": format!("{}/authorize", issuer.url),
            "token_endpoint": format!("{}/token", issuer.url),
            "jwks_uri": format!("{}/jwks", issuer.url),
            "code_challenge_methods_supported": ["S256"],
        }),
    )
}

async fn authorize(State(issuer): State<Issuer>, RawQuery(raw): RawQuery) -> Response {
    let query = decoded(raw.unwrap_or_default().as_bytes());
    let field = |name: &str| query.get(name).cloned().unwrap_or_default();
    let redirect_uri = field("redirect_uri");
    let well_formed = field("response_type") == "code"
        && field("client_id") == CLIENT_ID
        && field("code_challenge_method") == "S256"
        && field("scope").split(' ').any(|scope| scope == "openid")
        && !field("state").is_empty();
    if !well_formed {
        return (
            StatusCode::BAD_REQUEST,
            "not an authorization request of ours",
        )
            .into_response();
    }
    let mut ledger = issuer.ledger.lock().expect("ledger");
    let Some(identity) = ledger.next.clone() else {
        let to = format!(
            "{redirect_uri}?error=access_denied&state={}",
            field("state")
        );
        return (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response();
    };
    let code = format!("code-{}", ledger.codes.len() + 1);
    ledger.codes.insert(
        code.clone(),
        (field("code_challenge"), redirect_uri.clone(), identity),
    );
    let to = format!(
        "{redirect_uri}?code={code}&state={}",
        urlencode(&field("state"))
    );
    (StatusCode::SEE_OTHER, [(header::LOCATION, to)]).into_response()
}

fn urlencode(raw: &str) -> String {
    serde_urlencoded::to_string([("x", raw)]).expect("encode")[2..].to_owned()
}

async fn token(State(issuer): State<Issuer>, headers: HeaderMap, body: Bytes) -> Response {
    let form = decoded(&body);
    let refuse = |error: &str| {
        json(
            StatusCode::BAD_REQUEST,
            serde_json::json!({ "error": error }),
        )
    };
    let basic = format!(
        "Basic {}",
        STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    if headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        != Some(basic.as_str())
    {
        return json(
            StatusCode::UNAUTHORIZED,
            serde_json::json!({ "error": "invalid_client" }),
        );
    }
    let field = |name: &str| form.get(name).cloned().unwrap_or_default();
    let mut ledger = issuer.ledger.lock().expect("ledger");
    ledger.exchanges += 1;
    if field("grant_type") != "authorization_code" {
        return refuse("unsupported_grant_type");
    }
    // A code is good once.
    let Some((challenge, redirect_uri, identity)) = ledger.codes.remove(&field("code")) else {
        return refuse("invalid_grant");
    };
    let verified = URL_SAFE_NO_PAD.encode(Sha256::digest(field("code_verifier").as_bytes()));
    if verified != challenge || field("redirect_uri") != redirect_uri {
        return refuse("invalid_grant");
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let claims = serde_json::json!({
        "iss": issuer.url, "aud": identity.audience, "sub": identity.subject,
        "exp": now + 300, "nbf": now - 5, "iat": now,
        "tenant": identity.tenant, "role": identity.role,
    });
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("test-key-1".to_owned());
    let access_token = jsonwebtoken::encode(
        &header,
        &claims,
        &EncodingKey::from_ec_pem(KEY.as_bytes()).expect("key"),
    )
    .expect("sign");
    json(
        StatusCode::OK,
        serde_json::json!({
            "access_token": access_token, "token_type": "Bearer", "expires_in": 300,
        }),
    )
}
