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
    let operator = board.browser_in(&everywhere, "globex").await;
    let own = board.task("globex").await;
    let other = board.task("acme").await;
    let (status, system) = operator.text("/system").await;
    assert_eq!(status, 200);
    assert!(system.contains("Tasks of every tenant"));
    let (_, tasks) = operator.text("/tasks").await;
    assert!(tasks.contains(own.task_id.as_str()) && !tasks.contains(other.task_id.as_str()));
    assert!(tasks.contains("<span id=\"tenant\">globex</span>"));
}

#[tokio::test]
async fn a_tenant_sees_the_fleets_and_its_own_workers_only() {
    use taskstore::domain::{
        Reach, TaskSupport, TenantId, ToolDescription, ToolName, WorkerHeartbeat, WorkerId,
    };
    use taskstore::store::operations::OperationsStore;

    let board = Board::open().await;
    let tool = |name: &str| ToolName::parse(name).expect("tool");
    let report = |id: &str, tools: &[&str], described: &str| {
        WorkerHeartbeat::new(
            WorkerId::parse(id).expect("id"),
            tools.iter().map(|name| tool(name)).collect(),
            2,
            0,
        )
        .with_descriptions(
            tools
                .iter()
                .map(|name| {
                    ToolDescription::parse(tool(name), "", described, "", TaskSupport::Optional)
                        .expect("description")
                })
                .collect(),
        )
    };
    board
        .store
        .record_heartbeat(&report("host-1", &["echo"], "the operator's"))
        .await
        .expect("fleet worker");
    let acme = Reach::Tenant(TenantId::parse("acme").expect("tenant"));
    board
        .store
        .record_heartbeat(&report("host-1", &["echo", "private"], "IGNORE ALL").announced_by(acme))
        .await
        .expect("acme's worker");

    let globex = board
        .browser(&board.key("globex", Role::Client).await)
        .await;
    for page in ["/tools", "/workers", "/tools/echo"] {
        let (status, body) = globex.text(page).await;
        assert_eq!(status, 200, "{page}");
        assert!(
            !body.contains("IGNORE ALL"),
            "{page} shows acme's description"
        );
        assert!(!body.contains("private"), "{page} shows acme's tool");
    }
    let acme = board.browser(&board.key("acme", Role::Client).await).await;
    let (_, tools) = acme.text("/tools").await;
    assert!(tools.contains("private"), "acme sees its own tool");
    assert!(tools.contains("the operator"), "{tools}");
}

#[tokio::test]
async fn logging_out_ends_the_session_everywhere_even_for_a_copied_cookie() {
    let board = Board::open().await;
    let other_replica = board.replica().await;
    let key = board.key("acme", Role::Client).await;
    let browser = board.browser(&key).await;
    let task = board.task("acme").await;
    let copied = Browser::with_cookie_of(&other_replica, browser.cookie.clone().expect("cookie"));
    assert_eq!(
        copied.get("/tasks").await.status(),
        200,
        "a session works on every replica"
    );

    let out = browser.post("/logout", "").await;
    assert_eq!(out.status(), 303);
    assert_eq!(location(&out), "/login");
    // The copy taken before the logout loads nothing and changes nothing,
    // on either replica.
    for replica in [&board, &other_replica] {
        let copy = Browser::with_cookie_of(replica, browser.cookie.clone().expect("cookie"));
        assert_eq!(location(&copy.get("/tasks").await), "/login");
        let cancel = copy
            .post(&format!("/tasks/{}/cancel", task.task_id), "")
            .await;
        assert_ne!(cancel.status(), 200);
    }
    assert_eq!(board.status_of("acme", &task.task_id).await, "working");
    // A new login works again.
    assert_eq!(board.browser(&key).await.get("/tasks").await.status(), 200);
}

#[tokio::test]
async fn over_https_at_the_root_the_session_cookie_is_host_only() {
    let board = Board::with(|settings| settings.secure_cookie = true).await;
    let key = board.key("acme", Role::Client).await;
    let browser = board.browser(&key).await;
    let cookie = browser.cookie.clone().expect("cookie");
    assert!(
        cookie.starts_with("__Host-taskstore_dashboard="),
        "{cookie}"
    );
    assert_eq!(browser.get("/tasks").await.status(), 200);
    // A cookie of the unprefixed name (as a sibling host could plant) is
    // not read.
    let value = cookie.split_once('=').expect("pair").1;
    let planted = Browser::with_cookie_of(&board, format!("taskstore_dashboard={value}"));
    assert_eq!(location(&planted.get("/tasks").await), "/login");
}

#[tokio::test]
async fn an_answer_that_does_not_match_its_question_is_refused_and_the_question_stays_open() {
    use taskstore::domain::{InputKey, InputRequest, TenantId};
    use taskstore::store::execution::ExecutionStore;

    let board = Board::open().await;
    let id = crate::attempts::dispatched(&board, "acme").await;
    let tenant = TenantId::parse("acme").expect("tenant");
    let claim = board
        .store
        .claim(&tenant, &id, 1, "w")
        .await
        .expect("claim");
    let request = InputRequest::parse(
        r#"{"method":"elicitation/create","params":{"message":"Format disk?","requestedSchema":{"type":"object","properties":{"size":{"type":"string","enum":["small","large"]}},"required":["size"]}}}"#,
    )
    .expect("request");
    let key = InputKey::parse("confirm").expect("key");
    board
        .store
        .ask(&tenant, &id, &claim.lease_token, &key, &request)
        .await
        .expect("ask");
    let browser = board.browser(&board.key("acme", Role::Client).await).await;
    // Accepted with a value the schema does not allow.
    let refused = browser
        .post(
            &format!("/tasks/{id}/answer"),
            "key=confirm&action=accept&field.size=huge",
        )
        .await;
    assert_eq!(refused.status(), 400);
    let page = refused.text().await.expect("page");
    assert!(page.contains("content.size"), "the page names the field");
    assert_eq!(board.status_of("acme", &id).await, "input_required");
}
