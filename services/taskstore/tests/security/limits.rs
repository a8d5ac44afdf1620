//! Limits per tenant: quotas of live tasks (exact, counted by the store),
//! the create rate and the calls kept waiting (per replica), each tenant's
//! own or the defaults; refusals are RESOURCE_EXHAUSTED, the rate's with a
//! RetryInfo detail.

use std::time::Duration;

use taskstore::domain::{Admission, AdmissionPolicy, Rate, Role};
use taskstore::store::{Quotas, StoreConfig};
use tonic::Code;
use tonic_types::StatusExt as _;

use super::*;

async fn quotas_are_per_tenant_and_exact_under_concurrency(kind: Kind) {
    let config = StoreConfig {
        tenant_quotas: [(
            tenant("acme"),
            Quotas {
                dispatch_weight: None,
                max_priority: None,
                max_tasks: Some(3),
                max_tasks_per_session: None,
            },
        )]
        .into(),
        ..StoreConfig::default()
    };
    let world = World::configured(kind, config, |s| s).await;
    let acme = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let globex = world
        .identity(Some(&world.key("globex", Role::Client).await))
        .await;
    let mut creates = tokio::task::JoinSet::new();
    for _ in 0..12 {
        let mut client = acme.store.clone();
        creates.spawn(async move { client.create_task(create(None, None, false)).await });
    }
    let outcomes = creates.join_all().await;
    let made = outcomes.iter().filter(|o| o.is_ok()).count();
    assert_eq!(made, 3, "exactly the quota: {outcomes:?}");
    for refused in outcomes.iter().filter_map(|o| o.as_ref().err()) {
        assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    }
    // Another tenant keeps the default (unlimited here).
    for _ in 0..5 {
        globex
            .store
            .clone()
            .create_task(create(None, None, false))
            .await
            .expect("globex is not held to acme's quota");
    }
}

async fn creates_beyond_the_rate_are_told_when_to_retry(kind: Kind) {
    let admission = AdmissionPolicy {
        default: Admission {
            creates: Rate::new(0.5, 2),
            max_waiting_calls: None,
        },
        tenants: [(
            tenant("globex"),
            Admission {
                creates: None,
                max_waiting_calls: None,
            },
        )]
        .into(),
    };
    let world = World::configured(kind, StoreConfig::default(), |s| ServiceSettings {
        admission,
        ..s
    })
    .await;
    let mut acme = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let mut globex = world
        .identity(Some(&world.key("globex", Role::Client).await))
        .await;
    for _ in 0..2 {
        acme.store
            .create_task(create(None, None, false))
            .await
            .expect("within the burst");
    }
    let refused = acme
        .store
        .create_task(create(None, None, false))
        .await
        .expect_err("over the rate");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    let delay = refused
        .get_details_retry_info()
        .and_then(|info| info.retry_delay)
        .expect("a RetryInfo detail");
    assert!(
        delay > Duration::ZERO && delay <= Duration::from_secs(2),
        "{delay:?}"
    );
    for _ in 0..10 {
        globex
            .store
            .create_task(create(None, None, false))
            .await
            .expect("globex has no rate limit");
    }
}

async fn waiting_calls_are_capped_per_tenant(kind: Kind) {
    let admission = AdmissionPolicy {
        default: Admission {
            creates: None,
            max_waiting_calls: Some(1),
        },
        ..AdmissionPolicy::default()
    };
    let world = World::configured(kind, StoreConfig::default(), |s| ServiceSettings {
        admission,
        ..s
    })
    .await;
    let mut acme = world
        .identity(Some(&world.key("acme", Role::Client).await))
        .await;
    let mut globex = world
        .identity(Some(&world.key("globex", Role::Client).await))
        .await;
    let task = acme
        .store
        .create_task(create(None, None, false))
        .await
        .expect("create")
        .into_inner();
    let watch = || pb::WatchTaskRequest {
        lease_token: None,
        task_id: task.task_id.clone(),
        session_id: None,
    };
    let open = acme
        .store
        .watch_task(watch())
        .await
        .expect("the first stream")
        .into_inner();
    let refused = acme
        .store
        .watch_task(watch())
        .await
        .expect_err("a second stream");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    let mut waiting = tonic::Request::new(pb::GetTaskResultRequest {
        task_id: task.task_id.clone(),
        session_id: None,
        wait: true,
    });
    waiting.set_timeout(Duration::from_millis(500));
    let refused = acme
        .store
        .get_task_result(waiting)
        .await
        .expect_err("a waiting call");
    assert_eq!(refused.code(), Code::ResourceExhausted);
    // Another tenant has slots of its own.
    let other = globex
        .store
        .create_task(create(None, None, false))
        .await
        .expect("create")
        .into_inner();
    let _theirs = globex
        .store
        .watch_task(pb::WatchTaskRequest {
            lease_token: None,
            task_id: other.task_id,
            session_id: None,
        })
        .await
        .expect("globex's stream");
    // Closing the stream gives the slot back.
    drop(open);
    let mut reopened = None;
    for _ in 0..50 {
        if let Ok(stream) = acme.store.watch_task(watch()).await {
            reopened = Some(stream);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        reopened.is_some(),
        "the slot came back when the stream closed"
    );
}

macro_rules! on_every_backend {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Memory).await })*
        }
        mod sqlite {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Sqlite).await })*
        }
        mod postgres {
            $(#[tokio::test] async fn $case() { super::$case(super::Kind::Postgres).await })*
        }
    };
}

on_every_backend!(
    quotas_are_per_tenant_and_exact_under_concurrency,
    creates_beyond_the_rate_are_told_when_to_retry,
    waiting_calls_are_capped_per_tenant,
);
