//! Hostile requests: forged cross-site posts, tampered cookies, malformed
//! filters and ids, oversize forms. Each gets a clear answer and changes
//! nothing; every response carries the security headers.

use taskstore::domain::Role;

use crate::harness::{Board, Browser, location};

#[tokio::test]
async fn cross_site_posts_are_refused_and_change_nothing() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Client).await).await;
    let task = board.task("acme").await;
    let path = format!("/tasks/{}/cancel", task.task_id);
    for headers in [
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
        vec![("origin", "https://evil.example")],
        vec![("origin", "null")],
    ] {
        let refused = client.post_with(&path, "", &headers).await;
        assert_eq!(refused.status(), 403, "{headers:?}");
    }
    assert_eq!(board.status_of("acme", &task.task_id).await, "working");
    let host = format!("http://{}", board.addr);
    let same = client
        .post_with(&path, "", &[("origin", host.as_str())])
        .await;
    assert_eq!(same.status(), 303);
    assert_eq!(board.status_of("acme", &task.task_id).await, "cancelled");
}

#[tokio::test]
async fn tampered_or_foreign_cookies_log_nobody_in() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Client).await).await;
    let cookie = client.cookie.clone().expect("cookie");
    let mut tampered = cookie.clone().into_bytes();
    let last = tampered.len() - 3;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).expect("ascii");
    let other_service = Board::open().await;
    for value in [
        tampered,
        "taskstore_dashboard=".to_owned(),
        "taskstore_dashboard=%00%ff".to_owned(),
        format!("taskstore_dashboard={}", "A".repeat(5000)),
    ] {
        let forged = Browser::with_cookie_of(&board, value.clone());
        let response = forged.get("/tasks").await;
        assert_eq!(response.status(), 303, "{value:.60}");
        assert_eq!(location(&response), "/login");
    }
    // A cookie of another service (another store's key) opens nothing.
    let elsewhere = Browser::with_cookie_of(&other_service, cookie);
    assert_eq!(elsewhere.get("/tasks").await.status(), 303);
}

#[tokio::test]
async fn malformed_filters_ids_and_forms_get_clear_answers() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Client).await).await;
    for (query, field) in [
        ("status=done", "status"),
        ("from=yesterday", "from"),
        ("after=not-a-position", "after"),
        ("tool=a%20b", "tool"),
        ("message=%07", "message"),
    ] {
        let (status, page) = client.text(&format!("/tasks?{query}")).await;
        assert_eq!(status, 400, "{query}");
        assert!(page.contains(field), "{query}: {page}");
    }
    assert_eq!(client.text("/tasks/%20%00").await.0, 404);
    assert_eq!(client.text("/nowhere").await.0, 404);
    let too_many: String = (0..600).map(|i| format!("task=t{i}&")).collect();
    assert_eq!(client.post("/tasks/cancel", &too_many).await.status(), 400);
    let huge = format!("task={}", "x".repeat(300 * 1024));
    let oversize = client.post("/tasks/cancel", &huge).await;
    assert!(
        oversize.status() == 413 || oversize.status() == 400,
        "{}",
        oversize.status()
    );
}

#[tokio::test]
async fn every_response_carries_the_security_headers_and_assets_are_served() {
    let board = Board::open().await;
    let anonymous = Browser::new(&board);
    for path in ["/login", "/tasks", "/assets/dashboard.js", "/nowhere"] {
        let response = anonymous.get(path).await;
        let csp = response
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert!(
            csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
            "{path}: {csp}"
        );
        assert_eq!(
            response
                .headers()
                .get("x-content-type-options")
                .map(|v| v.as_bytes()),
            Some(&b"nosniff"[..]),
            "{path}"
        );
    }
    let script = anonymous.get("/assets/dashboard.js").await;
    assert_eq!(script.status(), 200);
    assert!(
        script.headers()["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with("text/javascript")
    );
    let page = anonymous.get("/login").await.text().await.expect("body");
    assert!(!page.contains("<script>"), "no inline script");
}

#[tokio::test]
async fn a_base_path_moves_every_link_and_the_cookie() {
    let board = Board::with(|settings| settings.base_path = "/ops/tasks".into()).await;
    let anonymous = Browser::new(&board);
    assert_eq!(
        location(&anonymous.get("/ops/tasks/tasks").await),
        "/ops/tasks/login"
    );
    assert_eq!(anonymous.get("/tasks").await.status(), 404);
    let key = board.key("acme", Role::Client).await;
    let login = anonymous
        .post("/ops/tasks/login", &format!("api_key={key}"))
        .await;
    assert_eq!(login.status(), 303);
    assert_eq!(location(&login), "/ops/tasks");
    let cookie = login.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(
        cookie.contains("Path=/ops/tasks")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
}

#[tokio::test]
async fn ids_holding_slashes_and_question_marks_stay_one_task() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Admin).await).await;
    let victim = board.task("acme").await;
    let tricky_id = format!("x/../../tasks/{}?", victim.task_id);
    let tricky = board.task_named("acme", Some(&tricky_id)).await;
    let link = format!("/tasks/x%2F..%2F..%2Ftasks%2F{}%3F", victim.task_id);
    let (_, list) = client.text("/tasks").await;
    assert!(list.contains(&format!("href=\"{link}\"")), "{list}");
    let (status, page) = client.text(&link).await;
    assert_eq!(status, 200);
    assert!(
        page.contains(&format!("action=\"{link}/cancel\"")),
        "{page}"
    );
    let cancelled = client.post(&format!("{link}/cancel"), "").await;
    assert_eq!(cancelled.status(), 303);
    assert_eq!(location(&cancelled), link);
    assert_eq!(board.status_of("acme", &tricky.task_id).await, "cancelled");
    assert_eq!(board.status_of("acme", &victim.task_id).await, "working");
}

#[tokio::test]
async fn cancel_all_matching_cancels_no_more_than_was_confirmed() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Client).await).await;
    let first = board.task_named("acme", Some("batch-1")).await;
    let second = board.task_named("acme", Some("batch-2")).await;
    let missing = client.post("/tasks/cancel-matching?id=batch-", "").await;
    assert_eq!(missing.status(), 400, "no confirmed count");
    let done = client
        .post("/tasks/cancel-matching?id=batch-", "expected=1")
        .await;
    assert_eq!(done.status(), 303);
    let statuses = [
        board.status_of("acme", &first.task_id).await,
        board.status_of("acme", &second.task_id).await,
    ];
    assert_eq!(
        statuses.iter().filter(|s| *s == "cancelled").count(),
        1,
        "{statuses:?}"
    );
}
