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

/// The tools page's last hour: each tool's ends, failure rate and times
/// from creation to end, of this tenant's tasks that ended in the hour.
pub async fn tool_activity_counts_each_tools_ends_and_times_in_the_last_hour(
    backend: &dyn Backend,
) {
    let Stores {
        store, insights, ..
    } = backend.stores(StoreConfig::default()).await;
    let tenant = tenant();
    let now = chrono::Utc::now();
    assert_eq!(
        insights
            .tool_activity(&tenant, now)
            .await
            .expect("none yet"),
        taskstore::domain::Activity::default()
    );
    let failed = NewResult {
        status: taskstore::domain::ResultStatus::Failed,
        message: Some("broken".into()),
        ..completed(r#"{"isError":true,"content":[]}"#)
    };
    let mut ends = Vec::new();
    for (tool, outcome) in [
        ("echo", Some(completed(r#"{"content":[]}"#))),
        ("echo", Some(completed(r#"{"content":[]}"#))),
        ("echo", Some(failed.clone())),
        ("echo", None),
        ("resize", Some(failed)),
    ] {
        let task = store
            .create_task(&all(), calling(tool))
            .await
            .expect("create");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        match outcome {
            Some(result) => store.store_result(&all(), &task.task_id, result).await,
            None => store.cancel_task(&all(), &task.task_id).await,
        }
        .expect("ends");
        ends.push(store.get_task(&all(), &task.task_id).await.expect("get"));
    }
    store
        .create_task(&all(), calling("echo"))
        .await
        .expect("still working: not counted");
    let theirs = store
        .create_task(&other_tenant(), calling("echo"))
        .await
        .expect("another tenant's");
    store
        .cancel_task(&other_tenant(), &theirs.task_id)
        .await
        .expect("cancel");

    let activity = insights
        .tool_activity(&tenant, chrono::Utc::now())
        .await
        .expect("activity");
    assert!(!activity.sampled);
    let named = |name: &str| taskstore::domain::ToolName::parse(name).expect("tool");
    let echo = activity.of(&named("echo")).expect("echo");
    assert_eq!((echo.completed, echo.failed, echo.cancelled), (2, 1, 1));
    assert_eq!(echo.failure_rate(), Some(1.0 / 3.0));
    let took: Vec<u64> = ends[..4]
        .iter()
        .map(|t| (t.last_updated_at - t.created_at).num_milliseconds() as u64)
        .collect();
    assert!(took.iter().all(|ms| *ms >= 20), "{took:?}");
    assert!(took.contains(&echo.p50_ms) && echo.p95_ms == *took.iter().max().expect("max"));
    let resize = activity.of(&named("resize")).expect("resize");
    assert_eq!((resize.completed, resize.failed), (0, 1));
    assert_eq!(activity.tools[0].tool, Some(named("echo")), "most first");
    let theirs = insights
        .tool_activity(&other_tenant().tenant, chrono::Utc::now())
        .await
        .expect("theirs");
    assert_eq!(theirs.tools.len(), 1);
    assert_eq!(theirs.tools[0].cancelled, 1);

    // Two hours on, nothing ended in the last hour.
    let later = insights
        .tool_activity(&tenant, chrono::Utc::now() + chrono::TimeDelta::hours(2))
        .await
        .expect("later");
    assert!(later.tools.is_empty());
}
