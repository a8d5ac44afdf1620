//! The statements made at run time (`QueryBuilder`s), with every optional
//! part on, for the statement check (`store/statements/tests.rs`).

use chrono::Utc;

use crate::domain::{
    CursorPosition, IdPrefix, MessageText, Scope, SearchPage, SearchPosition, SessionId,
    TaskFilter, TaskId, TaskSearch, TaskStatus, TenantId, ToolName, WorkerId,
};

/// Each dynamic statement, named by where it is built.
pub(crate) fn dynamic_statements() -> Vec<(&'static str, String)> {
    let tenant = TenantId::default_tenant();
    let session = SessionId::parse("s", 256).expect("session");
    let scope = Scope::session(session.clone());
    let tool = ToolName::parse("echo").expect("tool");
    let task_id = TaskId::parse("t").expect("task id");
    let filter = TaskFilter::new([TaskStatus::Working], Some(tool.clone()));
    let after = CursorPosition {
        created_at: Utc::now(),
        task_id: task_id.clone(),
    };
    let search = TaskSearch {
        statuses: vec![TaskStatus::Working],
        tool: Some(tool),
        session: Some(session),
        worker: Some(WorkerId::parse("w").expect("worker")),
        created_from: Some(Utc::now()),
        created_until: Some(Utc::now()),
        id_prefix: Some(IdPrefix::parse("t").expect("prefix")),
        message: Some(MessageText::parse("m").expect("message")),
    };
    let page = SearchPage::new(
        None,
        Some(SearchPosition {
            created_at: Utc::now(),
            task_id,
        }),
    );
    vec![
        (
            "postgres/listing.rs page_query",
            super::listing::page_query(&scope, &filter, Some(&after), 10)
                .sql()
                .to_owned(),
        ),
        (
            "postgres/search.rs page_query",
            super::search::page_query(&tenant, &search, &page)
                .sql()
                .to_owned(),
        ),
        (
            "postgres/search.rs scan_end_query",
            super::search::scan_end_query(&tenant, &page)
                .sql()
                .to_owned(),
        ),
    ]
}
