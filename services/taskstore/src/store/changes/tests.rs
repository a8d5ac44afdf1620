//! The change feed's unit tests.
use super::*;

fn id(raw: &str) -> TaskId {
    TaskId::parse(raw).expect("valid id")
}

fn tenant() -> String {
    Scope::tenant_wide().tenant.as_str().to_owned()
}

/// Subscribers of the tasks `a` and `b`, and one of their whole tenant.
fn subscribers_of_a_b_and_tenant(
    feed: &ChangeFeed,
) -> (Subscription, Subscription, TenantSubscription) {
    let scope = Scope::tenant_wide();
    (
        feed.subscribe(&scope, &id("a")),
        feed.subscribe(&scope, &id("b")),
        feed.subscribe_tenant(&tenant()),
    )
}

fn changed(task_id: &str, news: News) -> TaskChange {
    TaskChange::Changed {
        tenant: tenant(),
        task_id: task_id.to_owned(),
        news,
    }
}

/// The next wake, or `None` if nothing arrives within a moment (well
/// under the periodic re-check).
async fn woke(subscription: &mut Subscription) -> Option<Wake> {
    tokio::time::timeout(Duration::from_millis(50), subscription.next())
        .await
        .ok()
}

async fn heard(subscription: &mut TenantSubscription) -> Option<TenantEvent> {
    tokio::time::timeout(Duration::from_millis(50), subscription.next())
        .await
        .ok()
}

#[tokio::test]
async fn a_change_wakes_only_the_subscribers_of_its_task() {
    let feed = ChangeFeed::default();
    let scope = Scope::tenant_wide();
    let (mut a1, mut a2, mut b) = (
        feed.subscribe(&scope, &id("a")),
        feed.subscribe(&scope, &id("a")),
        feed.subscribe(&scope, &id("b")),
    );
    let working = News::Status(TaskStatus::Working);
    feed.publish(changed("a", working.clone()));
    assert_eq!(woke(&mut a1).await, Some(Wake::News(working.clone())));
    assert_eq!(woke(&mut a2).await, Some(Wake::News(working)));
    assert_eq!(woke(&mut b).await, None);

    // Another tenant's task of the same id is another task.
    feed.publish(TaskChange::Changed {
        tenant: "other".into(),
        task_id: "b".into(),
        news: News::Unknown,
    });
    assert_eq!(woke(&mut b).await, None);
    feed.publish(changed("b", News::Unknown));
    assert_eq!(woke(&mut b).await, Some(Wake::News(News::Unknown)));
}

fn finished(task_id: &str) -> TaskResult {
    let now = chrono::Utc::now();
    TaskResult {
        task: Task {
            task_id: id(task_id),
            status: TaskStatus::Completed,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl: None,
            poll_interval: Duration::from_secs(1),
            session_id: None,
            tool: None,
        },
        result: crate::domain::JsonObject::parse(r#"{"content":[]}"#).expect("json"),
    }
}

#[tokio::test]
async fn a_result_handed_over_reaches_its_tasks_subscribers_and_outlives_later_news() {
    let feed = ChangeFeed::default();
    let (mut a, mut b, mut tenant_wide) = subscribers_of_a_b_and_tenant(&feed);
    let stored = finished("a");
    feed.hand_over(&tenant(), "a", stored.clone());
    // The notification of the same change arrives after it.
    feed.publish(changed("a", News::Status(TaskStatus::Completed)));
    let woken = woke(&mut a).await;
    let Some(Wake::News(News::Finished(result))) = woken else {
        panic!("the result was replaced: {woken:?}");
    };
    assert_eq!(*result, stored);
    assert_eq!(woke(&mut b).await, None);
    assert!(
        matches!(
            heard(&mut tenant_wide).await,
            Some(TenantEvent::Changed { .. })
        ),
        "tenants hear the change once, from the feed"
    );
    assert_eq!(heard(&mut tenant_wide).await, None);
}

#[tokio::test]
async fn news_not_yet_taken_is_replaced_by_later_news() {
    let feed = ChangeFeed::default();
    let mut a = feed.subscribe(&Scope::tenant_wide(), &id("a"));
    feed.publish(changed("a", News::Status(TaskStatus::InputRequired)));
    feed.publish(changed("a", News::Status(TaskStatus::Completed)));
    assert_eq!(
        woke(&mut a).await,
        Some(Wake::News(News::Status(TaskStatus::Completed)))
    );
    assert_eq!(woke(&mut a).await, None);
}

#[tokio::test]
async fn a_resync_wakes_everyone_to_read_again() {
    let feed = ChangeFeed::default();
    let (mut a, mut b, mut whole) = subscribers_of_a_b_and_tenant(&feed);
    feed.publish(TaskChange::Resync);
    assert_eq!(woke(&mut a).await, Some(Wake::ReadAgain));
    assert_eq!(woke(&mut b).await, Some(Wake::ReadAgain));
    assert_eq!(heard(&mut whole).await, Some(TenantEvent::Resync));
}

#[tokio::test]
async fn a_tenant_subscriber_hears_its_tenant_in_order_and_resyncs_when_behind() {
    let feed = ChangeFeed::default();
    let mut acme = feed.subscribe_tenant(&tenant());
    let mut other = feed.subscribe_tenant("other");
    feed.publish(changed("a", News::Status(TaskStatus::Working)));
    feed.publish(changed("b", News::Unknown));
    assert_eq!(
        heard(&mut acme).await,
        Some(TenantEvent::Changed {
            task_id: "a".into(),
            news: News::Status(TaskStatus::Working)
        })
    );
    assert_eq!(
        heard(&mut acme).await,
        Some(TenantEvent::Changed {
            task_id: "b".into(),
            news: News::Unknown
        })
    );
    assert_eq!(
        heard(&mut other).await,
        None,
        "another tenant hears nothing"
    );

    for n in 0..=TENANT_BACKLOG {
        feed.publish(changed(&format!("t{n}"), News::Unknown));
    }
    assert_eq!(heard(&mut acme).await, Some(TenantEvent::Resync));
}

#[tokio::test]
async fn dropped_subscriptions_leave_nothing_behind_and_a_dropped_feed_closes_the_rest() {
    let feed = ChangeFeed::default();
    let scope = Scope::tenant_wide();
    let subscriptions: Vec<_> = (0..3)
        .map(|n| feed.subscribe(&scope, &id(&format!("t{}", n % 2))))
        .collect();
    let tenants: Vec<_> = (0..2).map(|_| feed.subscribe_tenant(&tenant())).collect();
    assert_eq!(locked(&feed.subscribers).by_task.len(), 2);
    assert_eq!(locked(&feed.subscribers).by_tenant.len(), 1);
    drop(subscriptions);
    drop(tenants);
    assert!(locked(&feed.subscribers).by_task.is_empty());
    assert!(locked(&feed.subscribers).by_tenant.is_empty());

    let mut left = feed.subscribe(&scope, &id("a"));
    let mut whole = feed.subscribe_tenant(&tenant());
    drop(feed);
    assert_eq!(woke(&mut left).await, Some(Wake::Closed));
    assert_eq!(heard(&mut whole).await, Some(TenantEvent::Closed));
}

#[tokio::test]
async fn a_tenants_resync_and_followers_only_news_reach_whom_they_name() {
    let feed = ChangeFeed::default();
    let scope = Scope::tenant_wide();
    let mut task = feed.subscribe(&scope, &id("a"));
    let mut followers = feed.subscribe_tenant(&tenant());
    let mut other = feed.subscribe_tenant("other");
    assert_eq!(
        feed.followed_tenants(),
        HashSet::from([tenant(), "other".to_owned()])
    );

    feed.publish_to_tenant_followers(changed("a", News::Unknown));
    assert_eq!(woke(&mut task).await, None, "not the task's subscribers");
    assert!(matches!(
        heard(&mut followers).await,
        Some(TenantEvent::Changed { .. })
    ));

    feed.resync_tenants(&[tenant()]);
    assert_eq!(woke(&mut task).await, Some(Wake::ReadAgain));
    assert_eq!(heard(&mut followers).await, Some(TenantEvent::Resync));
    assert_eq!(
        heard(&mut other).await,
        None,
        "another tenant reads nothing"
    );

    assert!(feed.is_heard(&tenant(), "a"));
    assert!(
        feed.is_heard("other", "x"),
        "the tenant's followers hear any task"
    );
    assert!(!feed.is_heard("nobody", "a"));

    drop((task, followers));
    assert_eq!(feed.followed_tenants(), HashSet::from(["other".to_owned()]));
    assert!(!feed.has_tenant_followers(&tenant()));
    assert!(!feed.is_heard(&tenant(), "a"));
}

/// A task's news with this status and message.
fn task_news(status: TaskStatus, message: &str) -> News {
    let mut task = finished("a").task;
    task.status = status;
    task.status_message = Some(message.to_owned());
    News::Task(Arc::new(ChangedTask {
        task,
        progress_token: None,
    }))
}

#[test]
fn later_news_replaces_earlier_unless_the_earlier_says_more() {
    use super::slot::merge;
    let working = Wake::News(task_news(TaskStatus::Working, "step 1"));
    let later = Wake::News(task_news(TaskStatus::Working, "step 2"));
    let cancelled = Wake::News(task_news(TaskStatus::Cancelled, "cancelled"));
    let status = Wake::News(News::Status(TaskStatus::Completed));
    let result = Wake::News(News::Finished(Arc::new(finished("a"))));

    assert_eq!(merge(None, working.clone()), working);
    assert_eq!(merge(Some(working.clone()), later.clone()), later);
    // A stale report of the running task never hides its end.
    assert_eq!(merge(Some(cancelled.clone()), later.clone()), cancelled);
    assert_eq!(merge(Some(status.clone()), later.clone()), status);
    assert_eq!(merge(Some(working.clone()), cancelled.clone()), cancelled);
    // Nor does a read asked for: a terminal state needs none.
    assert_eq!(merge(Some(cancelled.clone()), Wake::ReadAgain), cancelled);
    // A read asked for covers any news that follows it, except an end.
    assert_eq!(merge(Some(Wake::ReadAgain), later.clone()), Wake::ReadAgain);
    assert_eq!(merge(Some(later.clone()), Wake::ReadAgain), Wake::ReadAgain);
    assert_eq!(merge(Some(Wake::ReadAgain), cancelled.clone()), cancelled);
    // The result handed over says the most.
    assert_eq!(merge(Some(status.clone()), result.clone()), result);
    assert_eq!(merge(Some(result.clone()), status), result);
    assert_eq!(merge(Some(result.clone()), Wake::ReadAgain), result);
}

/// The race of a worker's follow missing a cancellation: a progress notice
/// read before the cancellation committed is told after its notification.
#[tokio::test]
async fn a_stale_report_told_after_a_cancellation_does_not_hide_it_from_a_watch() {
    let feed = ChangeFeed::default();
    let mut a = feed.subscribe(&Scope::tenant_wide(), &id("a"));
    let cancelled = task_news(TaskStatus::Cancelled, "cancelled");
    feed.publish(changed("a", cancelled.clone()));
    feed.publish(changed(
        "a",
        task_news(TaskStatus::Working, "slept 3 of 60 s"),
    ));
    assert_eq!(woke(&mut a).await, Some(Wake::News(cancelled)));
    assert_eq!(woke(&mut a).await, None);
}
