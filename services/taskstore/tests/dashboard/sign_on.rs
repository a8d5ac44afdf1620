//! Single sign-on (`--dashboard-oidc-client-id` with `--auth jwt`): the
//! authorization code flow with PKCE against a real HTTP issuer (`issuer`),
//! step by step as a browser takes it. The browser suite takes it in
//! Chromium, where the cookies' SameSite rules apply.

use reqwest::header::{LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use taskstore::auth::AuthMethod;
use taskstore::auth::jwt::JwtSettings;
use taskstore::dashboard::{ClientSecret, OidcSettings};

use crate::harness::{Board, Browser};
use crate::issuer::{AUDIENCE, CLIENT_ID, CLIENT_SECRET, Identity, Issuer};

async fn board_and_issuer() -> (Board, Issuer) {
    let issuer = Issuer::start().await;
    let jwt = JwtSettings {
        issuer: issuer.url.clone(),
        audience: AUDIENCE.into(),
        jwks_url: format!("{}/jwks", issuer.url),
        tenant_claim: "tenant".into(),
        role_claim: "role".into(),
        algorithms: vec![jsonwebtoken::Algorithm::ES256],
    };
    let board = Board::configured(
        |dashboard| {
            dashboard.oidc = Some(OidcSettings {
                client_id: CLIENT_ID.into(),
                client_secret: Some(ClientSecret::new(CLIENT_SECRET.into())),
                // Where the browser reaches it: the test's own address is
                // only known once bound, and the flow needs no more than
                // the path to match.
                public_url: "http://127.0.0.1".into(),
                scopes: "openid profile".into(),
            });
        },
        |settings| taskstore::settings::ServiceSettings {
            auth: vec![AuthMethod::ApiKeys, AuthMethod::Jwt],
            jwt: Some(jwt),
            ..settings
        },
    )
    .await;
    (board, issuer)
}

fn cookie_named(response: &reqwest::Response, name: &str) -> Option<String> {
    response
        .headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|value| value.starts_with(&format!("{name}=")))
        .map(str::to_owned)
}

/// The `name=value` of a `Set-Cookie`.
fn pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap_or_default().to_owned()
}

/// A flow begun at `start` (a path with its query): the flow cookie, and
/// where the issuer sent the browser back to (path and query).
async fn begin(board: &Board, start: &str) -> (String, String) {
    let browser = Browser::new(board);
    let started = browser.get(start).await;
    assert_eq!(started.status(), 200, "the start page");
    let refresh = started
        .headers()
        .get("refresh")
        .and_then(|v| v.to_str().ok())
        .expect("a refresh to the issuer")
        .to_owned();
    let flow = cookie_named(&started, "taskstore_dashboard_sign_in").expect("a flow cookie");
    assert!(
        flow.contains("SameSite=Lax") && flow.contains("HttpOnly"),
        "{flow}"
    );
    let target = refresh.strip_prefix("0; url=").expect("a refresh url");
    assert!(target.contains("code_challenge_method=S256"), "{target}");
    assert!(
        target.contains("redirect_uri=http%3A%2F%2F127.0.0.1%2Flogin%2Foidc%2Fcallback"),
        "{target}"
    );
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .expect("client");
    let back = http.get(target).send().await.expect("the issuer");
    assert_eq!(back.status(), 303, "the issuer sends the browser back");
    let location = back
        .headers()
        .get(LOCATION)
        .and_then(|v| v.to_str().ok())
        .expect("a location");
    let callback = location
        .strip_prefix("http://127.0.0.1")
        .expect("back to the public url")
        .to_owned();
    (pair(&flow), callback)
}

/// Comes back from the issuer to `callback` with `flow`.
async fn come_back(board: &Board, flow: &str, callback: &str) -> reqwest::Response {
    Browser::with_cookie_of(board, flow.to_owned())
        .get(callback)
        .await
}

/// A browser logged in through the issuer as `identity`, after `start`.
async fn signed_on(board: &Board, issuer: &Issuer, identity: Identity, start: &str) -> Browser {
    issuer.log_in_next(identity);
    let (flow, callback) = begin(board, start).await;
    let response = come_back(board, &flow, &callback).await;
    assert_eq!(response.status(), 200, "logged in");
    let refresh = response
        .headers()
        .get("refresh")
        .and_then(|v| v.to_str().ok());
    assert_eq!(refresh, Some("0; url=/"));
    let session = cookie_named(&response, "taskstore_dashboard").expect("a session cookie");
    assert!(session.contains("SameSite=Strict"), "{session}");
    let cleared = cookie_named(&response, "taskstore_dashboard_sign_in").expect("flow cleared");
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    Browser::with_cookie_of(board, pair(&session))
}

#[tokio::test]
async fn the_issuers_token_logs_in_to_its_own_tenant_with_its_role() {
    let (board, issuer) = board_and_issuer().await;
    let ours = board.task("acme").await;
    let theirs = board.task("globex").await;
    let (_, login) = Browser::new(&board).text("/login").await;
    assert!(login.contains("Single sign-on") && login.contains("API key"));

    let browser = signed_on(
        &board,
        &issuer,
        Identity::of("acme", "client"),
        "/login/oidc",
    )
    .await;
    let (status, page) = browser.text("/tasks").await;
    assert_eq!(status, 200);
    assert!(page.contains(ours.task_id.as_str()), "its tenant's task");
    assert!(
        !page.contains(theirs.task_id.as_str()),
        "not another tenant's"
    );
    let (status, _) = browser
        .text(&format!("/tasks/{}", theirs.task_id.as_str()))
        .await;
    assert_eq!(status, 404);
    // A client may cancel, as through the API.
    let cancelled = browser
        .post(&format!("/tasks/{}/cancel", ours.task_id.as_str()), "")
        .await;
    assert_eq!(cancelled.status(), 303);
    assert_eq!(board.status_of("acme", &ours.task_id).await, "cancelled");

    // A viewer's login sees and may not act.
    let viewer = signed_on(
        &board,
        &issuer,
        Identity::of("acme", "viewer"),
        "/login/oidc",
    )
    .await;
    let other = board.task("acme").await;
    let refused = viewer
        .post(&format!("/tasks/{}/cancel", other.task_id.as_str()), "")
        .await;
    assert_eq!(refused.status(), 403);
    assert_eq!(board.status_of("acme", &other.task_id).await, "working");
}

#[tokio::test]
async fn identities_of_every_tenant_name_one_and_workers_and_strangers_stay_out() {
    let (board, issuer) = board_and_issuer().await;
    let task = board.task("acme").await;
    let operator = signed_on(
        &board,
        &issuer,
        Identity::of("*", "admin"),
        "/login/oidc?tenant=acme",
    )
    .await;
    let (status, page) = operator.text("/tasks").await;
    assert_eq!(status, 200);
    assert!(page.contains(task.task_id.as_str()));

    let refused = |identity: Identity, start: &'static str, status: u16| {
        let (board, issuer) = (&board, &issuer);
        async move {
            issuer.log_in_next(identity.clone());
            let (flow, callback) = begin(board, start).await;
            let response = come_back(board, &flow, &callback).await;
            assert_eq!(response.status(), status, "{identity:?}");
            assert!(
                cookie_named(&response, "taskstore_dashboard").is_none(),
                "no session"
            );
        }
    };
    refused(Identity::of("*", "admin"), "/login/oidc", 400).await;
    refused(Identity::of("acme", "worker"), "/login/oidc", 403).await;
    let stranger = Identity {
        audience: "another-service".into(),
        ..Identity::of("acme", "admin")
    };
    refused(stranger, "/login/oidc", 401).await;
    let (status, _) = Browser::new(&board)
        .text("/login/oidc?tenant=no%20such")
        .await;
    assert_eq!(status, 400, "a malformed tenant");
}

#[tokio::test]
async fn a_callback_that_is_not_this_browsers_flow_changes_nothing() {
    let (board, issuer) = board_and_issuer().await;
    issuer.log_in_next(Identity::of("acme", "admin"));
    let (flow, callback) = begin(&board, "/login/oidc").await;

    // Without the flow cookie (another browser), or with another state.
    let response = Browser::new(&board).get(&callback).await;
    assert_eq!(response.status(), 400);
    let forged = callback.replace("state=", "state=x");
    let response = come_back(&board, &flow, &forged).await;
    assert_eq!(response.status(), 400);
    let (_, other_callback) = begin(&board, "/login/oidc").await;
    let response = come_back(&board, &flow, &other_callback).await;
    assert_eq!(response.status(), 400, "another flow's state");
    assert_eq!(issuer.exchanges(), 0, "no code was exchanged");

    // The issuer's refusal, shown.
    let denied = format!(
        "/login/oidc/callback?error=access_denied&state={}",
        callback.split("state=").nth(1).unwrap_or_default()
    );
    let response = come_back(&board, &flow, &denied).await;
    assert_eq!(response.status(), 401);
    assert!(
        response
            .text()
            .await
            .expect("body")
            .contains("access_denied")
    );

    // The real callback works once; its code replayed does not.
    let response = come_back(&board, &flow, &callback).await;
    assert_eq!(response.status(), 200);
    let response = come_back(&board, &flow, &callback).await;
    assert_eq!(response.status(), 401, "a code is good once");
    assert!(cookie_named(&response, "taskstore_dashboard").is_none());

    // A tampered flow cookie is no flow.
    let (flow, callback) = begin(&board, "/login/oidc").await;
    let tampered = format!("{}A", flow);
    let response = come_back(&board, &tampered, &callback).await;
    assert_eq!(response.status(), 400);
}
