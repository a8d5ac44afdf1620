//! Governed dispatch: a tool's queue takes only what it has room for; the
//! rest waits in the store, and what goes next is decided then: the
//! highest priority first, the tenants taking turns, each tenant's own
//! oldest first. The queue here has room for one job per relay pass, so
//! the order of the decisions is the order of the publishes.

use std::collections::HashMap;
use taskstore::StoreError;

use taskstore::domain::{
    DispatchRequest, FAIRNESS_KEY_WINDOW, KeyExpr, Priority, Scope, TenantId, ToolDescription,
    ToolName,
};

use super::*;
use crate::common::recorder::Recorder;
use crate::common::{Backend, Stores};

fn with_priority(priority: u32) -> NewTask {
    NewTask {
        dispatch: Some(DispatchRequest {
            fairness: None,
            rate: None,
            concurrency: None,
            tool: ToolName::parse("echo").expect("tool"),
            max_attempts: None,
            start: None,
            retry: Default::default(),
            priority: Priority::parse(priority, Priority::MAX).expect("priority"),
        }),
        ..new_task()
    }
}

fn tenant_scope(name: &str) -> Scope {
    Scope {
        tenant: TenantId::parse(name).expect("tenant"),
        session: None,
    }
}

/// Relays until nothing more goes out; the task ids in publish order, and
/// never more than `room` per pass.
async fn published_in_order(stores: &Stores, queue: &Recorder) -> Vec<String> {
    let room = queue
        .depth
        .map_or(u64::MAX, |depth| u64::from(depth.room()));
    for _ in 0..500 {
        let published = stores
            .dispatch
            .relay_due_jobs(queue, 100)
            .await
            .expect("relay");
        assert!(
            published <= room,
            "{published} published with room for {room}"
        );
        if published == 0 {
            break;
        }
    }
    queue
        .jobs
        .lock()
        .expect("lock")
        .iter()
        .map(|job| job.task_id.clone())
        .collect()
}

async fn create(stores: &Stores, scope: &Scope, task: NewTask) -> String {
    stores
        .store
        .create_task(scope, task)
        .await
        .expect("create")
        .task_id
        .to_string()
}

pub async fn a_backlog_goes_out_by_priority_with_tenants_taking_turns(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let queue = Recorder::with_room(1);
    if backend.chooses_tenant() {
        // A noisy tenant queues four, then a quiet one queues one, then the
        // noisy one queues an urgent one.
        let (noisy, quiet) = (tenant_scope("noisy"), tenant_scope("quiet"));
        let mut flood = Vec::new();
        for _ in 0..4 {
            flood.push(create(&stores, &noisy, with_priority(0)).await);
        }
        let waiting = create(&stores, &quiet, with_priority(0)).await;
        let urgent = create(&stores, &noisy, with_priority(5)).await;
        let expected: Vec<String> = [urgent, waiting].into_iter().chain(flood).collect();
        assert_eq!(published_in_order(&stores, &queue).await, expected);
    } else {
        // One tenant (the caller's): priority, then first in, first out.
        let mut plain = Vec::new();
        for _ in 0..3 {
            plain.push(create(&stores, &all(), with_priority(0)).await);
        }
        let urgent = create(&stores, &all(), with_priority(7)).await;
        let expected: Vec<String> = std::iter::once(urgent).chain(plain).collect();
        assert_eq!(published_in_order(&stores, &queue).await, expected);
    }
}

pub async fn a_queue_with_room_takes_new_jobs_at_once_in_order(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    // Nothing waits in the queue: its consumers take new jobs at once.
    let queue = Recorder {
        routable: true,
        depth: Some(taskstore::domain::QueueDepth {
            ready: 0,
            consumers: 1,
        }),
        ..Recorder::default()
    };
    let mut created = Vec::new();
    for priority in [0, 3, 0] {
        created.push(create(&stores, &all(), with_priority(priority)).await);
    }
    assert_eq!(
        stores
            .dispatch
            .relay_due_jobs(&queue, 100)
            .await
            .expect("relay"),
        3,
        "room for all of them: one pass"
    );
    let mut published = published_in_order(&stores, &queue).await;
    published.sort();
    created.sort();
    assert_eq!(published, created);
}

pub async fn priorities_out_of_range_are_refused(backend: &dyn Backend) {
    let store = backend
        .store(taskstore::store::StoreConfig::default())
        .await;
    assert!(Priority::parse(10, Priority::MAX).is_err());
    // The tenant-limits file caps a tenant's priorities: above the cap is
    // refused and creates nothing.
    let capped = backend
        .store(taskstore::store::StoreConfig {
            quotas: taskstore::store::Quotas {
                max_priority: Some(2),
                ..Default::default()
            },
            ..taskstore::store::StoreConfig::default()
        })
        .await;
    let refused = capped.create_task(&all(), with_priority(3)).await;
    assert!(
        matches!(&refused, Err(StoreError::InvalidArgument(m)) if m.contains("dispatch.priority")),
        "{refused:?}"
    );
    assert!(list_all(&capped, &all(), 10).await.is_empty());
    capped
        .create_task(&all(), with_priority(2))
        .await
        .expect("at the cap");
    store
        .create_task(&all(), with_priority(9))
        .await
        .expect("no cap: up to 9");
}

pub async fn a_heavier_tenant_gets_more_turns(backend: &dyn Backend) {
    if !backend.chooses_tenant() {
        return; // one tenant through gRPC: nothing to weigh
    }
    let mut config = with_policy(short_leases());
    config.tenant_quotas.insert(
        TenantId::parse("big").expect("tenant"),
        taskstore::store::Quotas {
            dispatch_weight: Some(3),
            ..Default::default()
        },
    );
    let stores = backend.stores(config).await;
    let (big, small) = (tenant_scope("big"), tenant_scope("small"));
    let mut bigs = Vec::new();
    for _ in 0..6 {
        bigs.push(create(&stores, &big, with_priority(0)).await);
        create(&stores, &small, with_priority(0)).await;
    }
    let order = published_in_order(&stores, &Recorder::with_room(1)).await;
    let first_eight = &order[..8];
    let from_big = first_eight.iter().filter(|id| bigs.contains(id)).count();
    assert_eq!(
        (from_big, 8 - from_big),
        (6, 2),
        "three turns to one: {first_eight:?}"
    );
    assert_eq!(order.len(), 12, "and every job goes out");
}

const FAIR: &str = "fair";

/// A worker serving the `fair` tool, whose customers take turns.
async fn declare_fair(stores: &Stores) -> KeyExpr {
    let key = KeyExpr::parse("arguments.customer").expect("key");
    let tool = ToolName::parse(FAIR).expect("tool");
    let description = ToolDescription::undescribed(tool).with_fairness(Some(key.clone()));
    super::key_limits::serve_described(stores, "w-fair", description).await;
    key
}

/// A task of the `fair` tool for `customer`, created as the edge creates
/// it: with what the tool declares (which the gRPC client leaves to the
/// service).
async fn create_fair(stores: &Stores, key: &KeyExpr, customer: &str) -> String {
    let dispatch = DispatchRequest {
        fairness: Some(key.clone()),
        rate: None,
        concurrency: None,
        priority: Default::default(),
        tool: ToolName::parse(FAIR).expect("tool"),
        max_attempts: None,
        start: None,
        retry: Default::default(),
    };
    super::key_limits::create_dispatched(stores, customer, dispatch)
        .await
        .to_string()
}

pub async fn a_tenants_fairness_keys_take_turns(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let key = declare_fair(&stores).await;
    // Customer c1 floods before c2 comes: they take turns, each first in,
    // first out.
    let mut c1 = Vec::new();
    for _ in 0..4 {
        c1.push(create_fair(&stores, &key, "c1").await);
    }
    let mut c2 = Vec::new();
    for _ in 0..2 {
        c2.push(create_fair(&stores, &key, "c2").await);
    }
    let expected = [&c1[0], &c2[0], &c1[1], &c2[1], &c1[2], &c1[3]].map(String::clone);
    assert_eq!(
        published_in_order(&stores, &Recorder::with_room(1)).await,
        expected
    );

    // More keys wait than one decision reads: every key's first job still
    // goes before any key's second.
    let keys = FAIRNESS_KEY_WINDOW + 6;
    let mut customer_of = HashMap::new();
    for _ in 0..2 {
        for n in 0..keys {
            let customer = format!("k{n:03}");
            customer_of.insert(create_fair(&stores, &key, &customer).await, customer);
        }
    }
    let order = published_in_order(&stores, &Recorder::with_room(1)).await;
    assert_eq!(order.len(), 2 * keys, "every job goes out");
    let mut first_round: Vec<&String> = order[..keys].iter().map(|id| &customer_of[id]).collect();
    first_round.sort();
    first_round.dedup();
    assert_eq!(first_round.len(), keys, "each key once before any twice");
}
