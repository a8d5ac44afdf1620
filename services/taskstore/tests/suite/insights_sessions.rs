//! The dashboard's list of sessions on every backend: each session's
//! unexpired tasks and unfinished ones, the most recently active first,
//! tasks without a session and other tenants' sessions left out, bounded.

use taskstore::domain::SessionSummary;
use taskstore::store::StoreConfig;

use super::insights::{calling, other_tenant};
use super::*;
use crate::common::{Backend, Stores};

pub async fn sessions_are_listed_most_recently_active_first(backend: &dyn Backend) {
    let Stores {
        store, insights, ..
    } = backend.stores(StoreConfig::default()).await;
    let tenant = tenant();
    assert_eq!(
        insights.sessions(&tenant, 10).await.expect("none yet"),
        vec![]
    );
    let first = store
        .create_task(&session("s-old"), calling("echo"))
        .await
        .expect("s-old's first");
    store
        .store_result(&all(), &first.task_id, completed(r#"{"content":[]}"#))
        .await
        .expect("completes");
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    store
        .create_task(&session("s-old"), calling("echo"))
        .await
        .expect("s-old's second");
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let newest = store
        .create_task(&session("s-new"), calling("echo"))
        .await
        .expect("s-new's");
    store
        .create_task(&all(), calling("echo"))
        .await
        .expect("no session");
    let foreign = Scope {
        session: Some(SessionId::parse("s-foreign", 256).expect("session")),
        ..other_tenant()
    };
    store
        .create_task(&foreign, calling("echo"))
        .await
        .expect("another tenant's");

    let sessions = insights.sessions(&tenant, 10).await.expect("sessions");
    let seen: Vec<(&str, u64, u64)> = sessions
        .iter()
        .map(|s| (s.session.as_str(), s.tasks, s.unfinished))
        .collect();
    assert_eq!(seen, vec![("s-new", 1, 1), ("s-old", 2, 1)]);
    assert_eq!(sessions[0].last_created_at, newest.created_at);
    assert!(
        sessions
            .iter()
            .all(|s: &SessionSummary| s.session.as_str() != "s-foreign")
    );
    assert_eq!(insights.sessions(&tenant, 1).await.expect("one").len(), 1);
    let others = insights
        .sessions(&other_tenant().tenant, 10)
        .await
        .expect("theirs");
    assert_eq!(others.len(), 1);
    assert_eq!(others[0].session.as_str(), "s-foreign");
}
