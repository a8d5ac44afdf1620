//! The task page's timeline of attempts: each attempt in order with its
//! worker, start, end and how it ended (escaped), and a note when older
//! attempts were dropped from the capped history.

use taskstore::domain::{
    DispatchRequest, JsonObject, MAX_ATTEMPT_RECORDS, NewResult, NewTask, ReleaseReason, RequestId,
    ResultStatus, Role, TaskId, TenantId, ToolName, TtlRequest,
};
use taskstore::store::TaskStore;
use taskstore::store::execution::ExecutionStore;

use crate::harness::{Board, scope};

/// A task of `tenant` dispatched to workers.
pub(crate) async fn dispatched(board: &Board, tenant: &str) -> TaskId {
    let request = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#;
    let task = NewTask {
        idempotency_key: None,
        task_id: None,
        ttl: TtlRequest::ServerDefault,
        poll_interval: None,
        request_id: RequestId::parse("1").expect("id"),
        request: JsonObject::parse(request).expect("request"),
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            priority: Default::default(),
            retry: Default::default(),
            start: None,
            tool: ToolName::parse("t").expect("tool"),
            max_attempts: Some(3),
        }),
        trace_context: None,
    };
    board
        .store
        .create_task(&scope(tenant), task)
        .await
        .expect("create")
        .task_id
}

/// The `<ol id="attempts">` of a page, and its items.
fn attempts(page: &str) -> Vec<&str> {
    let start = page.find(r#"<ol id="attempts">"#).expect("a timeline");
    let list = &page[start..];
    let list = &list[..list.find("</ol>").expect("the list ends")];
    list.split("<li ").skip(1).collect()
}

#[tokio::test]
async fn the_task_page_lists_its_attempts_in_order_with_how_each_ended() {
    let board = Board::open().await;
    let alice = board.browser(&board.key("alice", Role::Viewer).await).await;
    let tenant = TenantId::parse("alice").expect("tenant");
    let id = dispatched(&board, "alice").await;
    let (_, page) = alice.text(&format!("/tasks/{id}")).await;
    assert!(page.contains("No attempt yet."), "{page}");

    let first = board
        .store
        .claim(&tenant, &id, 1, "worker-one")
        .await
        .expect("claim");
    board
        .store
        .release(
            &tenant,
            &id,
            &first.lease_token,
            ReleaseReason::RetryableError,
            "disk <full>",
        )
        .await
        .expect("release");
    let second = board
        .store
        .claim(&tenant, &id, 2, "worker-two")
        .await
        .expect("claim");
    let (status, page) = alice.text(&format!("/tasks/{id}")).await;
    assert_eq!(status, 200);
    let items = attempts(&page);
    assert_eq!(items.len(), 2, "{page}");
    assert!(
        items[0].contains("Attempt 1 on <code>worker-one</code>"),
        "{}",
        items[0]
    );
    assert!(
        items[0].contains("released after a retryable error"),
        "{}",
        items[0]
    );
    assert!(
        items[0].contains("disk &lt;full&gt;"),
        "escaped: {}",
        items[0]
    );
    assert_eq!(
        items[0].matches("<time datetime=").count(),
        2,
        "start and end"
    );
    assert!(items[1].contains("worker-two") && items[1].contains("still running"));

    board
        .store
        .store_result(
            &scope("alice"),
            &id,
            NewResult {
                status: ResultStatus::Completed,
                result: JsonObject::parse(r#"{"content":[]}"#).expect("result"),
                message: None,
                lease: Some(second.lease_token),
            },
        )
        .await
        .expect("result");
    let (_, page) = alice.text(&format!("/tasks/{id}")).await;
    let items = attempts(&page);
    assert!(items[1].contains(r#"data-end="completed""#), "{}", items[1]);
    assert!(
        items[1].contains("<strong>completed</strong>"),
        "{}",
        items[1]
    );
    assert!(!page.contains("attempts-dropped"));
}

#[tokio::test]
async fn the_task_page_says_when_older_attempts_were_dropped() {
    let board = Board::open().await;
    let alice = board.browser(&board.key("alice", Role::Viewer).await).await;
    let tenant = TenantId::parse("alice").expect("tenant");
    let id = dispatched(&board, "alice").await;
    let total = MAX_ATTEMPT_RECORDS + 2;
    for n in 1..=total {
        let claim = board
            .store
            .claim(&tenant, &id, n as u64, &format!("w-{n}"))
            .await
            .expect("claim");
        board
            .store
            .release(
                &tenant,
                &id,
                &claim.lease_token,
                ReleaseReason::Shutdown,
                "",
            )
            .await
            .expect("release");
    }
    let (_, page) = alice.text(&format!("/tasks/{id}")).await;
    let items = attempts(&page);
    assert_eq!(items.len(), MAX_ATTEMPT_RECORDS);
    assert!(items[0].contains("<code>w-3</code>"), "{}", items[0]);
    assert!(page.contains("2 older attempts are not shown"), "{page}");
}
