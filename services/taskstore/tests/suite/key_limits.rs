//! Limits per key: a tool declares "at most N of my tasks at once per
//! key", and the dispatch decision publishes a key's job only while fewer
//! than N of the key's tasks are out (published and not yet ended); or "at
//! most N starts per window per key", and it publishes no more than that
//! within any window. Directly, the create carries the limit (the store's
//! contract); through gRPC, the service reads it from the heartbeat that
//! declared it.

use std::time::Duration;

use taskstore::domain::{
    ConcurrencyLimit, DispatchRequest, RateLimit, TaskId, TaskStatus, ToolDescription, ToolName,
    WorkerHeartbeat, WorkerId,
};

use super::*;
use crate::common::recorder::Recorder;
use crate::common::{Backend, Stores};

pub(super) const TOOL: &str = "limited";

pub(super) fn tool() -> ToolName {
    ToolName::parse(TOOL).expect("tool")
}

/// Worker `worker`, of 8 slots, serving the tool `description` describes.
pub(super) async fn serve_described(stores: &Stores, worker: &str, description: ToolDescription) {
    let heartbeat = WorkerHeartbeat::new(
        WorkerId::parse(worker).expect("id"),
        vec![description.name.clone()],
        8,
        0,
    )
    .with_descriptions(vec![description]);
    stores
        .operations
        .record_heartbeat(&heartbeat)
        .await
        .expect("heartbeat");
}

/// A worker serving the tool, declaring `limit`.
pub(super) async fn declare(stores: &Stores, limit: &ConcurrencyLimit) {
    let description = ToolDescription::undescribed(tool()).with_concurrency(Some(limit.clone()));
    serve_described(stores, "w-limits", description).await;
}

/// A task of `tool_name` for `customer`, created as the edge creates it:
/// with what the tool declares (which the gRPC client leaves to the
/// service).
pub(super) async fn create_of(
    stores: &Stores,
    tool_name: &str,
    customer: &str,
    concurrency: Option<ConcurrencyLimit>,
    rate: Option<RateLimit>,
) -> TaskId {
    let dispatch = DispatchRequest {
        fairness: None,
        rate,
        concurrency,
        priority: Default::default(),
        tool: ToolName::parse(tool_name).expect("tool"),
        max_attempts: None,
        start: None,
        retry: Default::default(),
    };
    create_dispatched(stores, customer, dispatch).await
}

/// A task for `customer` dispatched as `dispatch` says (its tool and what
/// the tool declares).
pub(super) async fn create_dispatched(
    stores: &Stores,
    customer: &str,
    dispatch: DispatchRequest,
) -> TaskId {
    let request = format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"{}","arguments":{{"customer":"{customer}"}}}}}}"#,
        dispatch.tool
    );
    let task = NewTask {
        request: JsonObject::parse(request).expect("request"),
        dispatch: Some(dispatch),
        ..new_task()
    };
    stores
        .store
        .create_task(&all(), task)
        .await
        .expect("create")
        .task_id
}

/// A task of the limited tool for `customer`.
pub(super) async fn create_for(
    stores: &Stores,
    limit: &ConcurrencyLimit,
    customer: &str,
) -> TaskId {
    create_of(stores, TOOL, customer, Some(limit.clone()), None).await
}

/// Relays once; the task ids published by this pass.
pub(super) async fn relay(stores: &Stores, queue: &Recorder) -> Vec<String> {
    let before = queue.jobs.lock().expect("lock").len();
    stores
        .dispatch
        .relay_due_jobs(queue, 100)
        .await
        .expect("relay");
    queue.jobs.lock().expect("lock")[before..]
        .iter()
        .map(|job| job.task_id.clone())
        .collect()
}

pub(super) fn sorted(mut ids: Vec<String>) -> Vec<String> {
    ids.sort();
    ids
}

pub(super) async fn complete(stores: &Stores, id: &TaskId, generation: u64) {
    let claim = stores
        .execution
        .claim(&tenant(), id, generation, "w")
        .await
        .expect("claim");
    let result = NewResult {
        lease: Some(claim.lease_token),
        ..completed(r#"{"content":[]}"#)
    };
    stores
        .store
        .store_result(&all(), id, result)
        .await
        .expect("result");
}

pub async fn a_key_runs_no_more_than_its_limit_at_once(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let limit = ConcurrencyLimit::parse(2, "arguments.customer").expect("limit");
    declare(&stores, &limit).await;
    let mut acme = Vec::new();
    for _ in 0..4 {
        acme.push(create_for(&stores, &limit, "acme").await);
    }
    let other = create_for(&stores, &limit, "globex").await;
    // A queue with room for everything: only the limit holds jobs back.
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    let mut first = vec![acme[0].to_string(), acme[1].to_string(), other.to_string()];
    first.sort();
    assert_eq!(sorted(relay(&stores, &queue).await), first, "two of acme's");
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "acme is full: its others wait, spending no attempt"
    );
    // One of acme's ends: its slot goes to the next of acme's, oldest first.
    complete(&stores, &acme[0], 1).await;
    assert_eq!(relay(&stores, &queue).await, [acme[2].to_string()]);
    assert!(relay(&stores, &queue).await.is_empty());
    // A claimed task holds its slot while it runs; another customer's
    // tasks are not held back by acme's.
    let claim = stores
        .execution
        .claim(&tenant(), &acme[1], 1, "w")
        .await
        .expect("claim");
    let more = create_for(&stores, &limit, "globex").await;
    assert_eq!(relay(&stores, &queue).await, [more.to_string()]);
    stores
        .store
        .store_result(
            &all(),
            &acme[1],
            NewResult {
                lease: Some(claim.lease_token),
                ..completed(r#"{"content":[]}"#)
            },
        )
        .await
        .expect("result");
    assert_eq!(relay(&stores, &queue).await, [acme[3].to_string()]);
}

pub async fn a_slot_comes_back_when_its_workers_lease_expires(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    // One at a time for the whole tool.
    let limit = ConcurrencyLimit::parse(1, "").expect("limit");
    declare(&stores, &limit).await;
    let first = create_for(&stores, &limit, "a").await;
    let second = create_for(&stores, &limit, "b").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(relay(&stores, &queue).await, [first.to_string()]);
    // Its worker claims it, then freezes (or is killed): the slot is held
    // until the lease runs out, then the next job goes.
    stores
        .execution
        .claim(&tenant(), &first, 1, "frozen")
        .await
        .expect("claim");
    assert!(relay(&stores, &queue).await.is_empty());
    let_leases_expire().await;
    assert_eq!(relay(&stores, &queue).await, [second.to_string()]);
    // The lost attempt's task is dispatched again, and waits for the slot.
    assert_eq!(
        stores.dispatch.reap_expired_leases().await.expect("reap"),
        1
    );
    assert!(relay(&stores, &queue).await.is_empty(), "the key is full");
    complete(&stores, &second, 1).await;
    assert_eq!(relay(&stores, &queue).await, [first.to_string()]);
}

pub async fn an_operator_sets_a_tenants_own_limit_per_tool(backend: &dyn Backend) {
    // The tenant-limits file gives the tenant one of `limited` at a time,
    // a tool whose workers declare no limit, and two of `shared`, whose
    // workers declare four per customer.
    let own = std::collections::BTreeMap::from([
        (tool(), 1),
        (ToolName::parse("shared").expect("tool"), 2),
    ]);
    let stores = backend
        .stores(taskstore::store::StoreConfig {
            tenant_concurrency: std::collections::BTreeMap::from([(tenant(), own)]),
            ..with_policy(short_leases())
        })
        .await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    // (Declared before the first create: an edge reads the tools served
    // once in a while.)
    let shared = ConcurrencyLimit::parse(4, "arguments.customer").expect("limit");
    let description = ToolDescription::undescribed(ToolName::parse("shared").expect("tool"))
        .with_concurrency(Some(shared.clone()));
    serve_described(&stores, "w-shared", description).await;
    let first = create_undeclared(&stores).await;
    create_undeclared(&stores).await;
    assert_eq!(relay(&stores, &queue).await, [first.to_string()]);

    for _ in 0..3 {
        create_shared(&stores, &shared, "acme").await;
    }
    create_shared(&stores, &shared, "globex").await;
    assert_eq!(
        relay(&stores, &queue).await.len(),
        3,
        "two of acme's (the tenant's own number), one of globex's"
    );
}

/// A task of `limited`, whose workers (none here) declare no limit.
async fn create_undeclared(stores: &Stores) -> TaskId {
    create_of(stores, TOOL, "a", None, None).await
}

async fn create_shared(stores: &Stores, limit: &ConcurrencyLimit, customer: &str) -> TaskId {
    create_of(stores, "shared", customer, Some(limit.clone()), None).await
}

pub async fn a_parked_task_holds_no_slot(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    let limit = ConcurrencyLimit::parse(1, "").expect("limit");
    declare(&stores, &limit).await;
    let asking = create_for(&stores, &limit, "a").await;
    let next = create_for(&stores, &limit, "b").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    assert_eq!(relay(&stores, &queue).await, [asking.to_string()]);
    let lease = stores
        .execution
        .claim(&tenant(), &asking, 1, "w")
        .await
        .expect("claim")
        .lease_token;
    stores
        .execution
        .ask(
            &tenant(),
            &asking,
            &lease,
            &input_key("k"),
            &confirm_question("Proceed?"),
        )
        .await
        .expect("ask");
    assert!(
        relay(&stores, &queue).await.is_empty(),
        "asking still holds it"
    );
    stores
        .execution
        .release(
            &tenant(),
            &asking,
            &lease,
            taskstore::domain::ReleaseReason::Parked,
            "waiting",
        )
        .await
        .expect("park");
    // Waiting for its answer, it holds nothing: the next task runs.
    assert_eq!(relay(&stores, &queue).await, [next.to_string()]);
}

pub async fn a_keys_rate_holds_its_starts_per_window(backend: &dyn Backend) {
    let stores = backend.stores(with_policy(short_leases())).await;
    // Two starts per second per customer.
    let rate = RateLimit::parse(2, Duration::from_secs(1), "arguments.customer").expect("rate");
    let description = ToolDescription::undescribed(tool()).with_rate(Some(rate.clone()));
    serve_described(&stores, "w-rates", description).await;
    let rated = |customer: &'static str| {
        let rate = rate.clone();
        let stores = &stores;
        async move {
            create_of(stores, TOOL, customer, None, Some(rate))
                .await
                .to_string()
        }
    };
    let mut acme = Vec::new();
    for _ in 0..3 {
        acme.push(rated("acme").await);
    }
    let globex = rated("globex").await;
    let queue = Recorder {
        routable: true,
        ..Recorder::default()
    };
    let started = std::time::Instant::now();
    let mut first = vec![acme[0].clone(), acme[1].clone(), globex];
    first.sort();
    assert_eq!(sorted(relay(&stores, &queue).await), first);
    // The third of acme's waits for the window, spending no attempt, while
    // nothing else holds it back (no limit on running tasks).
    assert!(relay(&stores, &queue).await.is_empty());
    // The first starts were recorded after `started`, so the window cannot
    // open before a second from it; when exactly it opens depends on how long
    // that first relay took, so this polls rather than sleeping a fixed time.
    let deadline = started + Duration::from_secs(5);
    let third = loop {
        let sent = relay(&stores, &queue).await;
        if !sent.is_empty() || std::time::Instant::now() > deadline {
            break sent;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        started.elapsed() >= Duration::from_millis(990),
        "the window opened early, {:?} after the first starts",
        started.elapsed()
    );
    assert_eq!(third, [acme[2].clone()]);
    let task = stores
        .store
        .get_task(&all(), &TaskId::parse(&acme[2]).expect("id"))
        .await
        .expect("get");
    assert_eq!(task.status, TaskStatus::Working);
}
