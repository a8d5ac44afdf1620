//! Backing a key off until a time, and what governed dispatch shows an
//! operator (and lets one lift): the cases of `key_limits.rs`'s world.

use std::time::Duration;

use taskstore::domain::ConcurrencyLimit;

use super::key_limits::{TOOL, complete, create_for, declare, relay};
use super::*;
use crate::common::Backend;
use crate::common::recorder::Recorder;

pub async fn a_back_off_holds_its_key_until_the_time_and_spends_no_attempt(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let limit = ConcurrencyLimit::parse(1, "arguments.customer").expect("limit");
    declare(&stores, &limit).await;
    let told = create_for(&stores, &limit, "acme").await;
    let waiting = create_for(&stores, &limit, "acme").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(relay(&stores, &queue).await, [told.to_string()]);
    let lease = stores
        .execution
        .claim(&tenant(), &told, 1, "w")
        .await
        .expect("claim")
        .lease_token;
    // Its upstream answered 429, Retry-After: 1 s.
    let outcome = stores
        .execution
        .release(
            &tenant(),
            &told,
            &lease,
            taskstore::domain::ReleaseReason::BackOff {
                wait: Duration::from_secs(1),
            },
            "429 from upstream",
        )
        .await
        .expect("release");
    let paused_at = std::time::Instant::now();
    match outcome {
        taskstore::domain::ReleaseOutcome::Retry { after } => assert!(
            after > Duration::from_millis(800) && after <= Duration::from_secs(1),
            "{after:?}"
        ),
        other => panic!("expected a retry, got {other:?}"),
    }
    let task = stores.store.get_task(&all(), &told).await.expect("get");
    assert!(
        task.status_message
            .as_deref()
            .is_some_and(|m| m.starts_with("backing off for") && m.ends_with("429 from upstream")),
        "{:?}",
        task.status_message
    );
    // The key's other task waits too, though its slot is free; another
    // key's goes.
    assert!(relay(&stores, &queue).await.is_empty(), "acme is paused");
    let other = create_for(&stores, &limit, "globex").await;
    assert_eq!(relay(&stores, &queue).await, [other.to_string()]);
    tokio::time::sleep(Duration::from_millis(1100).saturating_sub(paused_at.elapsed())).await;
    // Then acme's go, one at a time (its limit), oldest first.
    assert_eq!(relay(&stores, &queue).await, [waiting.to_string()]);
    complete(&stores, &waiting, 1).await;
    assert_eq!(relay(&stores, &queue).await, [told.to_string()]);
    let again = stores
        .execution
        .claim(&tenant(), &told, 2, "w")
        .await
        .expect("claim");
    assert_eq!(again.attempt, 1, "the back-off spent no attempt");
}

pub async fn what_is_held_back_shows_per_tool_and_key(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let limit = ConcurrencyLimit::parse(1, "arguments.customer").expect("limit");
    declare(&stores, &limit).await;
    let first = create_for(&stores, &limit, "acme").await;
    create_for(&stores, &limit, "acme").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(relay(&stores, &queue).await, [first.to_string()]);
    let view = stores.operations.dispatch_view().await.expect("view");
    let tool_view = view.iter().find(|t| t.tool == TOOL).expect("the tool");
    assert_eq!(tool_view.waiting, 1, "{view:?}");
    let acme = &tool_view.keys[0];
    assert_eq!(acme.key, r#"arguments.customer="acme""#);
    assert_eq!((acme.running, acme.max_running), (1, Some(1)));
    assert!(acme.full() && acme.paused_until.is_none());

    // Backed off: the key shows its pause.
    let lease = stores
        .execution
        .claim(&tenant(), &first, 1, "w")
        .await
        .expect("claim")
        .lease_token;
    stores
        .execution
        .release(
            &tenant(),
            &first,
            &lease,
            taskstore::domain::ReleaseReason::BackOff {
                wait: Duration::from_secs(60),
            },
            "429",
        )
        .await
        .expect("back off");
    let view = stores.operations.dispatch_view().await.expect("view");
    let acme = &view.iter().find(|t| t.tool == TOOL).expect("the tool").keys[0];
    assert_eq!(acme.running, 0, "the slot was given back");
    assert!(acme.paused_until.is_some(), "{acme:?}");
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "paused for a minute"
    );

    // An operator lifts it: the key's jobs go now, the one that backed
    // off among them (oldest first, one at a time: its limit).
    let key = acme.key.clone();
    assert!(
        !stores
            .operations
            .lift_pause(TOOL, "no such key")
            .await
            .expect("lift")
    );
    assert!(
        stores
            .operations
            .lift_pause(TOOL, &key)
            .await
            .expect("lift")
    );
    assert!(
        !stores
            .operations
            .lift_pause(TOOL, &key)
            .await
            .expect("lift"),
        "once"
    );
    assert_eq!(relay(&stores, &queue).await.len(), 1);
    let view = stores.operations.dispatch_view().await.expect("view");
    let acme = &view.iter().find(|t| t.tool == TOOL).expect("the tool").keys[0];
    assert_eq!((acme.running, acme.paused_until), (1, None));
}
