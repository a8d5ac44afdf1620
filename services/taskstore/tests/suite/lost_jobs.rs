//! PostgreSQL (or `dev`'s store) is the truth, the broker a transport: a
//! published job stays known until its task is claimed, and one no worker
//! claimed in time is published again (the broker may have lost it: a
//! queue deleted, a node's disk gone). The recording queue here keeps what
//! it is given and delivers nothing, as a queue that lost its jobs.

use std::time::Duration;

use taskstore::domain::ConcurrencyLimit;

use super::key_limits::{complete, create_for, declare, relay, sorted};
use super::*;
use crate::common::Backend;
use crate::common::recorder::Recorder;

/// Past a first republish interval of a second (and the background
/// settling of the publish, on PostgreSQL).
const PAST_THE_INTERVAL: Duration = Duration::from_millis(1500);

/// Relays until a pass publishes something (the republish falls due a
/// second after the publish settled, which a loaded machine may delay);
/// what that pass published.
async fn relay_until_one_goes(stores: &crate::common::Stores, queue: &Recorder) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let published = relay(stores, queue).await;
        if !published.is_empty() || std::time::Instant::now() > deadline {
            return published;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub async fn a_job_nobody_claimed_is_published_again_until_it_is(backend: &dyn Backend) {
    let policy = ExecutionPolicy {
        republish_after: Duration::from_secs(1),
        ..short_leases()
    };
    let stores = backend.stores(with_policy(policy)).await;
    // One at a time for the whole tool: a job published again keeps its
    // slot, and takes no second one.
    let limit = ConcurrencyLimit::parse(1, "arguments.customer").expect("limit");
    declare(&stores, &limit).await;
    let lost = create_for(&stores, &limit, "acme").await;
    let claimed = create_for(&stores, &limit, "globex").await;
    let behind = create_for(&stores, &limit, "acme").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(
        sorted(relay(&stores, &queue).await),
        sorted(vec![lost.to_string(), claimed.to_string()])
    );
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "not before its time"
    );
    // A worker got one of the two; the other's job never arrives.
    let claim = stores
        .execution
        .claim(&tenant(), &claimed, 1, "w")
        .await
        .expect("claim");

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "not before its interval of a second"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = relay_until_one_goes(&stores, &queue).await;
    assert_eq!(
        again,
        [lost.to_string()],
        "the unclaimed job again, alone: the claimed one is known claimed, and acme's \
         next still waits for the slot the lost job holds"
    );
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "the next try waits twice as long"
    );
    // Both copies carry the same generation: the first claim wins, the
    // other is refused.
    complete(&stores, &lost, 1).await;
    assert!(
        stores
            .execution
            .claim(&tenant(), &lost, 1, "w2")
            .await
            .is_err(),
        "the duplicate is fenced"
    );
    assert_eq!(
        relay(&stores, &queue).await,
        [behind.to_string()],
        "the ended task gave its slot to the next of its key"
    );
    stores
        .store
        .store_result(
            &all(),
            &claimed,
            NewResult {
                lease: Some(claim.lease_token),
                ..completed(r#"{"content":[]}"#)
            },
        )
        .await
        .expect("result");
    complete(&stores, &behind, 1).await;
    tokio::time::sleep(PAST_THE_INTERVAL * 2).await;
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "nothing is published again once every task was claimed"
    );
    let backlog = stores.operations.outbox_backlog().await.expect("backlog");
    assert_eq!(backlog.jobs, 0, "{backlog:?}");
}
