//! Who sees and does what from the dashboard: the tenant of the key, roles
//! through the rights table, worker keys refused, revoked keys logged out,
//! another tenant's tasks and events never shown.

use std::time::Duration;

use taskstore::domain::Role;
use taskstore::store::TaskStore;

use crate::harness::{Board, Browser, location};

#[tokio::test]
async fn a_tenant_never_sees_another_tenants_tasks_pages_or_events() {
    let board = Board::open().await;
    let alice = board.browser(&board.key("alice", Role::Client).await).await;
    let own = board.task("alice").await;
    let foreign = board.task("bob").await;

    let (status, list) = alice.text("/tasks").await;
    assert_eq!(status, 200);
    assert!(list.contains(own.task_id.as_str()));
    assert!(!list.contains(foreign.task_id.as_str()));

    // Another tenant's task is the same page as a missing one.
    let (foreign_status, foreign_page) = alice.text(&format!("/tasks/{}", foreign.task_id)).await;
    let (missing_status, missing_page) = alice.text("/tasks/no-such-task").await;
    assert_eq!((foreign_status, missing_status), (404, 404));
    assert_eq!(foreign_page, missing_page);
    let (status, _) = alice.text(&format!("/tasks?id={}", foreign.task_id)).await;
    assert_eq!(status, 200);

    // Nor can it act on it.
    let cancel = alice
        .post(&format!("/tasks/{}/cancel", foreign.task_id), "")
        .await;
    assert_eq!(cancel.status(), 404);
    assert_eq!(board.status_of("bob", &foreign.task_id).await, "working");

    // Live events: bob's change never reaches alice's stream; hers does.
    let mut events = alice.get("/events").await;
    assert_eq!(events.status(), 200);
    let first = next_event(&mut events).await;
    assert!(first.starts_with("event: ready"), "{first}");
    board
        .store
        .cancel_task(&crate::harness::scope("bob"), &foreign.task_id)
        .await
        .expect("cancel bob's");
    board
        .store
        .cancel_task(&crate::harness::scope("alice"), &own.task_id)
        .await
        .expect("cancel alice's");
    let change = next_event(&mut events).await;
    assert!(change.starts_with("event: task"), "{change}");
    assert!(change.contains(own.task_id.as_str()), "{change}");
    assert!(!change.contains(foreign.task_id.as_str()), "{change}");
}

/// The next event of an SSE response (keep-alive comments skipped).
async fn next_event(response: &mut reqwest::Response) -> String {
    let mut text = String::new();
    loop {
        let chunk = tokio::time::timeout(Duration::from_secs(5), response.chunk())
            .await
            .expect("an event within 5 s")
            .expect("the stream")
            .expect("not ended");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(end) = text.find("\n\n") {
            let event = text[..end].to_owned();
            if !event.starts_with(':') {
                return event;
            }
            text.drain(..end + 2);
        }
    }
}

#[tokio::test]
async fn viewers_see_and_change_nothing_clients_cannot_delete_admins_can() {
    let board = Board::open().await;
    let task = board.task("acme").await;
    let path = format!("/tasks/{}", task.task_id);

    let viewer = board.browser(&board.key("acme", Role::Viewer).await).await;
    for page in [
        "/",
        "/tasks",
        "/questions",
        "/tools",
        "/workers",
        "/sessions",
    ] {
        assert_eq!(viewer.text(page).await.0, 200, "a viewer reads {page}");
    }
    assert_eq!(viewer.text("/system").await.0, 403);
    let (status, page) = viewer.text(&path).await;
    assert_eq!(status, 200);
    assert!(!page.contains("Cancel task") && !page.contains("Delete task"));
    for action in ["cancel", "delete", "rerun"] {
        let refused = viewer.post(&format!("{path}/{action}"), "").await;
        assert_eq!(refused.status(), 403, "a viewer's {action}");
    }
    assert_eq!(
        viewer
            .post("/tasks/cancel", &format!("task={}", task.task_id))
            .await
            .status(),
        403
    );
    assert_eq!(board.status_of("acme", &task.task_id).await, "working");

    let client = board.browser(&board.key("acme", Role::Client).await).await;
    let (_, page) = client.text(&path).await;
    assert!(page.contains("Cancel task") && !page.contains("Delete task"));
    assert_eq!(
        client.post(&format!("{path}/delete"), "").await.status(),
        403
    );
    assert_eq!(board.status_of("acme", &task.task_id).await, "working");

    let admin = board.browser(&board.key("acme", Role::Admin).await).await;
    let (_, page) = admin.text(&path).await;
    assert!(page.contains("Delete task"));
    let deleted = admin.post(&format!("{path}/delete"), "").await;
    assert_eq!(deleted.status(), 303);
    assert_eq!(admin.text(&path).await.0, 404);
}

#[tokio::test]
async fn cancel_selected_and_all_matching_cancel_exactly_those() {
    let board = Board::open().await;
    let client = board.browser(&board.key("acme", Role::Client).await).await;
    let (a, b, c) = (
        board.task("acme").await,
        board.task("acme").await,
        board.task("acme").await,
    );
    let selected = client
        .post(
            "/tasks/cancel",
            &format!("task={}&task={}", a.task_id, b.task_id),
        )
        .await;
    assert_eq!(selected.status(), 303);
    assert!(location(&selected).ends_with("notice=cancelled-2"));
    assert_eq!(board.status_of("acme", &a.task_id).await, "cancelled");
    assert_eq!(board.status_of("acme", &c.task_id).await, "working");

    let (status, confirm) = client
        .text(&format!("/tasks/cancel-matching?id={}", c.task_id))
        .await;
    assert_eq!(status, 200);
    assert!(confirm.contains("Cancel 1 tasks"), "{confirm}");
    let done = client
        .post(
            &format!("/tasks/cancel-matching?id={}", c.task_id),
            "expected=1",
        )
        .await;
    assert_eq!(done.status(), 303);
    assert_eq!(board.status_of("acme", &c.task_id).await, "cancelled");
}

#[tokio::test]
async fn worker_keys_cannot_log_in_and_revoked_keys_are_logged_out() {
    let board = Board::open().await;
    let anonymous = Browser::new(&board);
    let worker_key = board.key("acme", Role::Worker).await;
    let refused = anonymous
        .post("/login", &format!("api_key={worker_key}"))
        .await;
    assert_eq!(refused.status(), 403);
    assert!(refused.headers().get("set-cookie").is_none());
    let wrong = anonymous
        .post("/login", "api_key=tsk_AAAAAAAAAAAA_nope")
        .await;
    assert_eq!(wrong.status(), 401);
    assert_eq!(location(&anonymous.get("/tasks").await), "/login");

    let key = board.key("acme", Role::Client).await;
    let browser = board.browser(&key).await;
    assert_eq!(browser.get("/tasks").await.status(), 200);
    let key_id = key.split('_').nth(1).expect("key id");
    board.keys.revoke_key(key_id).await.expect("revoke");
    for _ in 0..80 {
        let response = browser.get("/tasks").await;
        if response.status() == 303 {
            assert_eq!(location(&response), "/login");
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("a revoked key's session still shows pages after 8 s");
}

#[tokio::test]
async fn a_read_only_dashboard_shows_everything_and_allows_no_action() {
    let board = Board::with(|settings| settings.read_only = true).await;
    let admin = board.browser(&board.key("acme", Role::Admin).await).await;
    let task = board.task("acme").await;
    let (status, page) = admin.text(&format!("/tasks/{}", task.task_id)).await;
    assert_eq!(status, 200);
    assert!(!page.contains("Cancel task") && !page.contains("Delete task"));
    let refused = admin
        .post(&format!("/tasks/{}/cancel", task.task_id), "")
        .await;
    assert_eq!(refused.status(), 403);
    assert!(refused.text().await.expect("body").contains("read-only"));
    assert_eq!(board.status_of("acme", &task.task_id).await, "working");
}

#[tokio::test]
async fn only_keys_that_reach_every_tenant_see_the_system_page_and_name_their_tenant() {
    let board = Board::open().await;
    let tenant_admin = board.browser(&board.key("acme", Role::Admin).await).await;
    assert_eq!(tenant_admin.get("/system").await.status(), 403);
    let (_, page) = tenant_admin.text("/tasks").await;
    assert!(!page.contains("/system"));

    let everywhere = board.key("*", Role::Admin).await;
    let anonymous = Browser::new(&board);
    let unnamed = anonymous
        .post("/login", &format!("api_key={everywhere}"))
        .await;
    assert_eq!(
        unnamed.status(),
        400,
        "a key for every tenant must name one"
    );
    let named = anonymous
        .post("/login", &format!("api_key={everywhere}&tenant=globex"))
        .await;
    assert_eq!(named.status(), 303);
    let cookie = named.headers()["set-cookie"]
        .to_str()
        .expect("ascii")
        .split(';')
        .next()
        .expect("cookie")
        .to_owned();
    let operator = Browser::with_cookie_of(&board, cookie);
    let own = board.task("globex").await;
    let other = board.task("acme").await;
    let (status, system) = operator.text("/system").await;
    assert_eq!(status, 200);
    assert!(system.contains("Tasks of every tenant"));
    let (_, tasks) = operator.text("/tasks").await;
    assert!(tasks.contains(own.task_id.as_str()) && !tasks.contains(other.task_id.as_str()));
    assert!(tasks.contains("<span id=\"tenant\">globex</span>"));
}
