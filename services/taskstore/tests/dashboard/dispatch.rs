//! A tool's dispatch on its page: an operator of every tenant sees its keys
//! (running against the limit, pauses) and lifts a pause there; a tenant's
//! own admin sees none of it (the keys carry every tenant's values) and may
//! lift nothing.

use std::time::Duration;

use taskstore::domain::{
    ConcurrencyLimit, DispatchRequest, JsonObject, NewTask, ReleaseReason, RequestId, Role, Scope,
    TenantId, ToolDescription, ToolName, TtlRequest, WorkerHeartbeat, WorkerId,
};
use taskstore::store::TaskStore;
use taskstore::store::execution::ExecutionStore;
use taskstore::store::operations::OperationsStore;

use crate::harness::Board;

const TOOL: &str = "quotes";
/// A tool without limits: its back-off pauses the whole tool (the empty key).
const WIDE: &str = "crawl";

#[tokio::test]
async fn an_operator_sees_a_tools_keys_and_lifts_a_pause_a_tenant_admin_cannot() {
    let board = Board::open().await;
    let tool = ToolName::parse(TOOL).expect("tool");
    let limit = ConcurrencyLimit::parse(2, "arguments.customer").expect("limit");
    let wide = ToolName::parse(WIDE).expect("tool");
    let heartbeat = WorkerHeartbeat::new(
        WorkerId::parse("w-1").expect("id"),
        vec![tool.clone(), wide.clone()],
        4,
        0,
    )
    .with_descriptions(vec![
        ToolDescription::undescribed(tool.clone()).with_concurrency(Some(limit.clone())),
        ToolDescription::undescribed(wide.clone()),
    ]);
    board
        .store
        .record_heartbeat(&heartbeat)
        .await
        .expect("heartbeat");

    // One of acme's tasks runs, and its upstream says: wait a minute.
    back_off(&board, &tool, Some(limit)).await;
    let view = board.store.dispatch_view().await.expect("view");
    let paused = view
        .iter()
        .find(|d| d.tool == TOOL)
        .and_then(|d| d.keys.iter().find(|k| k.paused_until.is_some()))
        .expect("a paused key")
        .key
        .clone();

    // A tenant's own admin: the tool, but not its keys; and no lift.
    let tenant_admin = board.browser(&board.key("acme", Role::Admin).await).await;
    let (status, page) = tenant_admin.text(&format!("/tools/{TOOL}")).await;
    assert_eq!(status, 200);
    assert!(
        !page.contains("dispatch-keys")
            && !page.contains("dispatch-history")
            && !page.contains("c-9"),
        "{page}"
    );
    let refused = tenant_admin
        .post(&format!("/tools/{TOOL}/lift-pause"), &lift_form(&paused))
        .await;
    assert_eq!(refused.status(), 403);
    let (_, list) = tenant_admin.text("/tools").await;
    assert!(
        !list.contains(">Waiting<") && !list.contains("paused"),
        "{list}"
    );

    // An operator of every tenant: the tool paused in the list, and the
    // key, paused, with its button.
    let operator = board
        .browser_in(&board.key("*", Role::Admin).await, "globex")
        .await;
    let (_, list) = operator.text("/tools").await;
    assert!(
        list.contains(">Waiting<") && list.contains("paused"),
        "{list}"
    );
    let (status, page) = operator.text(&format!("/tools/{TOOL}")).await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"dispatch-keys\""), "{page}");
    // The hour's chart, with its numbers per key (this read is a sample).
    assert!(
        page.contains("id=\"dispatch-history\"") && page.contains("polyline"),
        "{page}"
    );
    let table = &page[page
        .find("dispatch-history-table")
        .expect("the chart's table")..];
    assert!(table.contains("c-9"), "the paused key has a row: {table}");
    assert!(
        page.contains("c-9") && page.contains("/lift-pause"),
        "{page}"
    );
    let lifted = operator
        .post(&format!("/tools/{TOOL}/lift-pause"), &lift_form(&paused))
        .await;
    assert_eq!(lifted.status(), 303);
    let view = board.store.dispatch_view().await.expect("view");
    assert!(
        view.iter()
            .flat_map(|d| d.keys.iter())
            .all(|k| k.paused_until.is_none()),
        "{view:?}"
    );
    let (_, page) = operator.text(&format!("/tools/{TOOL}")).await;
    assert!(!page.contains("/lift-pause"), "nothing left to lift");

    // The whole tool's pause, whose key is the empty one.
    back_off(&board, &wide, None).await;
    let (_, page) = operator.text(&format!("/tools/{WIDE}")).await;
    assert!(
        page.contains("(the whole tool)") && page.contains("/lift-pause"),
        "{page}"
    );
    let lifted = operator
        .post(&format!("/tools/{WIDE}/lift-pause"), &lift_form(""))
        .await;
    assert_eq!(lifted.status(), 303);
    let (_, page) = operator.text(&format!("/tools/{WIDE}")).await;
    assert!(
        !page.contains("/lift-pause"),
        "the whole tool's pause is lifted"
    );

    // Hostile forms change nothing.
    for form in ["", "other=1", &format!("key={}", "x".repeat(300))] {
        let response = operator
            .post(&format!("/tools/{TOOL}/lift-pause"), form)
            .await;
        assert!(
            [303, 400].contains(&response.status().as_u16()),
            "{form}: {}",
            response.status()
        );
    }
}

/// Creates a task of acme's for `tool`, claims it, and backs its key off
/// for a minute.
async fn back_off(board: &Board, tool: &ToolName, limit: Option<ConcurrencyLimit>) {
    let acme = TenantId::parse("acme").expect("tenant");
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{{"customer":"c-9"}}}}}}"#
    );
    let task = board
        .store
        .create_task(
            &Scope {
                tenant: acme.clone(),
                session: None,
            },
            NewTask {
                idempotency_key: None,
                task_id: None,
                ttl: TtlRequest::ServerDefault,
                poll_interval: None,
                request_id: RequestId::parse("1").expect("id"),
                request: JsonObject::parse(request).expect("request"),
                dispatch: Some(DispatchRequest {
                    fairness: None,
                    rate: None,
                    concurrency: limit,
                    priority: Default::default(),
                    tool: tool.clone(),
                    max_attempts: None,
                    start: None,
                    retry: Default::default(),
                }),
                trace_context: None,
            },
        )
        .await
        .expect("create");
    let claim = board
        .store
        .claim(&acme, &task.task_id, 1, "w-1")
        .await
        .expect("claim");
    board
        .store
        .release(
            &acme,
            &task.task_id,
            &claim.lease_token,
            ReleaseReason::BackOff {
                wait: Duration::from_secs(60),
            },
            "429 from upstream",
        )
        .await
        .expect("back off");
}

/// The lift form of `key`.
fn lift_form(key: &str) -> String {
    serde_urlencoded::to_string([("key", key)]).expect("encode")
}
