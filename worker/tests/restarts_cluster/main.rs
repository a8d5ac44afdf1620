//! A three-node RabbitMQ cluster loses the node the relay publishes to and
//! the workers consume from, under load (issue 27): the service and the
//! workers, given every node's address, move to another node; the quorum
//! queues keep their jobs; every task completes once with its own result.
//! Starts its own nodes (`cluster`), so it runs in the `restarts` profile,
//! alone: three Erlang VMs starting take the whole machine for a while.

mod cluster;
#[path = "../common/mod.rs"]
mod common;

use std::time::Duration;

use cluster::Cluster;
use common::Env;
use common::load::{Ledger, assert_all_echoed, create_echo_tasks};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_a_broker_node_under_load_loses_no_task() {
    let cluster = Cluster::start();
    let urls = cluster.urls();
    let mut env = Env::new().await;
    env.start_service(&["--amqp-url", &urls]);
    let mut workers = vec![
        env.start_worker("cluster-a", "echo", None, &["--amqp-url", &urls]),
        env.start_worker("cluster-b", "echo", None, &["--amqp-url", &urls]),
    ];
    let ledger = Ledger::default();
    let stop = CancellationToken::new();
    let loader = create_echo_tasks(
        env.endpoint.clone(),
        "cluster",
        ledger.clone(),
        stop.clone(),
    );
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The node the relay publishes to; every process starts with the first
    // address, so the workers consume from it too.
    let relay_node = cluster
        .node_of_connection(&cluster.nodes[0], "taskstore relay")
        .unwrap_or_else(|| {
            panic!(
                "the relay's connection is not listed: {}",
                cluster.connections(&cluster.nodes[0])
            )
        });
    let worker_node = cluster.node_of_connection(&cluster.nodes[0], "taskworker cluster-a");
    assert_eq!(
        worker_node.as_deref(),
        Some(relay_node.as_str()),
        "a worker shares the relay's node"
    );
    let lost = cluster
        .nodes
        .iter()
        .find(|node| node.name == relay_node)
        .expect("one of ours");
    lost.halt();
    tokio::time::sleep(Duration::from_secs(6)).await;
    stop.cancel();
    loader.await.expect("load");

    let seen = std::mem::take(&mut *ledger.lock().expect("ledger"));
    assert!(
        seen.refused.is_empty(),
        "creates never need the broker: {:?}",
        seen.refused.first()
    );
    assert!(
        seen.created.len() > 100,
        "tasks flowed: {}",
        seen.created.len()
    );
    assert_all_echoed(&env.endpoint, &seen.created).await;
    let survivor = cluster
        .nodes
        .iter()
        .find(|node| node.name != relay_node)
        .expect("a node left");
    let moved = cluster
        .node_of_connection(survivor, "taskstore relay")
        .expect("the relay is connected again");
    assert_ne!(moved, relay_node, "the relay moved to another node");
    for worker in &mut workers {
        assert!(!worker.has_exited(), "the workers carried on");
    }
    assert!(!env.service.as_mut().expect("service").has_exited());
}
