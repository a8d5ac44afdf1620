//! `--auth jwt`: tokens of an OIDC issuer, checked against its JWKS
//! (served here), its issuer and audience, their lifetime (with leeway)
//! and an allow-list of algorithms; the JWKS is fetched again when a token
//! names an unknown key (the issuer rotated its keys).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use taskstore::auth::AuthMethod;
use taskstore::auth::jwt::JwtSettings;
use taskstore::store::StoreConfig;
use tonic::Code;

use super::*;

const ISSUER: &str = "https://issuer.test/realms/tasks";
const AUDIENCE: &str = "taskstore";
const KEY: &str = include_str!("../fixtures/jwt-es256.pem");
const OTHER_KEY: &str = include_str!("../fixtures/jwt-es256-other.pem");
const JWKS: &str = include_str!("../fixtures/jwt-jwks.json");
const ROTATED_JWKS: &str = include_str!("../fixtures/jwt-jwks-rotated.json");

/// A JWKS endpoint whose content the test changes, counting fetches.
struct Issuer {
    url: String,
    jwks: Arc<Mutex<Option<String>>>,
    fetches: Arc<AtomicUsize>,
}

async fn issuer() -> Issuer {
    let jwks = Arc::new(Mutex::new(Some(JWKS.to_owned())));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (served, counted) = (jwks.clone(), fetches.clone());
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let body = served.lock().expect("lock").clone();
            async move {
                match body {
                    Some(body) => (axum::http::StatusCode::OK, body),
                    None => (axum::http::StatusCode::SERVICE_UNAVAILABLE, String::new()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/jwks", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Issuer { url, jwks, fetches }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs()
}

fn claims(tenant: &str, role: &str) -> serde_json::Value {
    serde_json::json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "svc-1",
        "exp": now() + 300, "nbf": now() - 5, "iat": now(),
        "tenant": tenant, "role": role,
    })
}

fn sign(claims: &serde_json::Value, kid: &str, pem: &str) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(
        &header,
        claims,
        &EncodingKey::from_ec_pem(pem.as_bytes()).expect("key"),
    )
    .expect("sign")
}

async fn code_of(world: &World, token: &str) -> Code {
    let mut who = world.identity(Some(token)).await;
    let listed = who
        .store
        .list_tasks(pb::ListTasksRequest {
            cursor: None,
            page_size: None,
            session_id: None,
            statuses: Vec::new(),
            tool: None,
        })
        .await;
    match listed {
        Ok(_) => Code::Ok,
        Err(status) => status.code(),
    }
}

async fn jwt_world(issuer: &Issuer) -> World {
    let jwt = JwtSettings {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        jwks_url: issuer.url.clone(),
        tenant_claim: "tenant".into(),
        role_claim: "role".into(),
        algorithms: vec![Algorithm::ES256, Algorithm::RS256],
    };
    World::configured(Kind::Memory, StoreConfig::default(), |s| ServiceSettings {
        auth: vec![AuthMethod::Jwt, AuthMethod::ApiKeys],
        jwt: Some(jwt),
        ..s
    })
    .await
}

#[tokio::test]
async fn tokens_of_the_issuer_act_in_their_tenant_with_their_role() {
    let issuer = issuer().await;
    let world = jwt_world(&issuer).await;
    let acme = sign(&claims("acme", "client"), "test-key-1", KEY);
    let mut client = world.identity(Some(&acme)).await;
    let task = client
        .store
        .create_task(create(Some("by-jwt"), None, false))
        .await
        .expect("a client token creates")
        .into_inner();
    let globex = sign(&claims("globex", "client"), "test-key-1", KEY);
    let mut other = world.identity(Some(&globex)).await;
    let unseen = other
        .store
        .get_task(pb::GetTaskRequest {
            task_id: task.task_id.clone(),
            session_id: None,
        })
        .await
        .expect_err("another tenant's token");
    assert_eq!(unseen.code(), Code::NotFound);
    let worker = sign(&claims("acme", "worker"), "test-key-1", KEY);
    let mut worker = world.identity(Some(&worker)).await;
    let refused = worker
        .store
        .create_task(create(None, None, false))
        .await
        .expect_err("a worker token");
    assert_eq!(refused.code(), Code::PermissionDenied);
    // API keys still work beside tokens.
    assert_eq!(
        code_of(&world, &world.key("acme", Role::Client).await).await,
        Code::Ok
    );
}

#[tokio::test]
async fn bad_tokens_are_refused_alike() {
    let issuer = issuer().await;
    let world = jwt_world(&issuer).await;
    let valid = claims("acme", "client");
    let with = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut c = valid.clone();
        change(&mut c);
        sign(&c, "test-key-1", KEY)
    };
    assert_eq!(
        code_of(&world, &sign(&valid, "test-key-1", KEY)).await,
        Code::Ok
    );
    // Expired within the leeway still passes; beyond it, not.
    assert_eq!(
        code_of(&world, &with(&|c| c["exp"] = (now() - 10).into())).await,
        Code::Ok
    );
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let none_alg = format!(
        "{}.{}.",
        encoded.encode(br#"{"alg":"none","kid":"test-key-1"}"#),
        encoded.encode(valid.to_string())
    );
    // The classic confusion: HMAC keyed with the issuer's public key.
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("test-key-1".into());
    let confused = jsonwebtoken::encode(&hs, &valid, &EncodingKey::from_secret(JWKS.as_bytes()))
        .expect("sign");
    let cases = [
        ("expired", with(&|c| c["exp"] = (now() - 120).into())),
        ("not yet valid", with(&|c| c["nbf"] = (now() + 120).into())),
        (
            "another issuer",
            with(&|c| c["iss"] = "https://evil.test".into()),
        ),
        (
            "another audience",
            with(&|c| c["aud"] = "someone-else".into()),
        ),
        (
            "no expiry",
            with(&|c| {
                c.as_object_mut().expect("object").remove("exp");
            }),
        ),
        ("an unknown role", with(&|c| c["role"] = "root".into())),
        (
            "no tenant",
            with(&|c| {
                c.as_object_mut().expect("object").remove("tenant");
            }),
        ),
        (
            "a client of every tenant",
            with(&|c| c["tenant"] = "*".into()),
        ),
        (
            "signed by another key",
            sign(&valid, "test-key-1", OTHER_KEY),
        ),
        ("an unknown key id", sign(&valid, "no-such-key", KEY)),
        ("alg none", none_alg),
        ("HMAC with the public key", confused),
        ("garbage", "eyJhbGciOi.x.y".to_owned()),
    ];
    for (what, token) in cases {
        assert_eq!(
            code_of(&world, &token).await,
            Code::Unauthenticated,
            "{what}"
        );
    }
}

#[tokio::test]
async fn a_rotated_key_is_fetched_and_an_unreachable_issuer_is_unavailable() {
    let issuer = issuer().await;
    let world = jwt_world(&issuer).await;
    assert_eq!(
        code_of(&world, &sign(&claims("acme", "client"), "test-key-1", KEY)).await,
        Code::Ok
    );
    let fetched = issuer.fetches.load(Ordering::SeqCst);
    // Cached: more tokens, no more fetches.
    for _ in 0..5 {
        assert_eq!(
            code_of(&world, &sign(&claims("acme", "client"), "test-key-1", KEY)).await,
            Code::Ok
        );
    }
    assert_eq!(issuer.fetches.load(Ordering::SeqCst), fetched);

    *issuer.jwks.lock().expect("lock") = Some(ROTATED_JWKS.to_owned());
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let rotated = sign(&claims("acme", "client"), "test-key-2", OTHER_KEY);
    assert_eq!(
        code_of(&world, &rotated).await,
        Code::Ok,
        "the new key is fetched on first sight"
    );

    *issuer.jwks.lock().expect("lock") = None;
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let unknown = sign(&claims("acme", "client"), "test-key-3", KEY);
    assert_eq!(
        code_of(&world, &unknown).await,
        Code::Unavailable,
        "keys cannot be checked now"
    );
    assert_eq!(
        code_of(&world, &rotated).await,
        Code::Ok,
        "cached keys keep working while the issuer is down"
    );
}
