//! The worker registry: heartbeats in, ListTools out.

use std::sync::Arc;
use std::time::Duration;

use taskstore::grpc::{InputLimits, pb};
use taskstore::store::StoreConfig;
use tonic::Code;
use tonic::transport::Channel;

use crate::common;
use pb::task_store_client::TaskStoreClient;

/// Workers report what they serve; ListTools shows it until they stop.
#[tokio::test]
async fn tools_are_listed_while_their_workers_report() {
    use pb::task_execution_client::TaskExecutionClient;
    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
    let (addr, _shutdown, _handle) =
        common::spawn_server(store.clone(), InputLimits::default()).await;
    let channel = common::grpc_channel(addr).await;
    let mut client = TaskStoreClient::new(channel.clone());
    let mut execution = TaskExecutionClient::new(channel);
    let listed = |client: &mut TaskStoreClient<Channel>| {
        let mut client = client.clone();
        async move {
            client
                .list_tools(pb::ListToolsRequest {})
                .await
                .expect("list tools")
                .into_inner()
                .tools
                .into_iter()
                .map(|t| (t.name, t.workers, t.slots, t.busy))
                .collect::<Vec<_>>()
        }
    };
    assert!(listed(&mut client).await.is_empty());
    let answer = execution
        .heartbeat(report("w1", &["echo", "sleep"], 1, false))
        .await
        .expect("heartbeat")
        .into_inner();
    assert_eq!(answer.interval.map(|d| d.seconds), Some(10));
    execution
        .heartbeat(report("w2", &["echo"], 3, false))
        .await
        .expect("heartbeat");
    assert_eq!(
        listed(&mut client).await,
        [("echo".to_owned(), 2, 8, 4), ("sleep".to_owned(), 1, 4, 1)]
    );
    execution
        .heartbeat(report("w1", &["echo", "sleep"], 0, true))
        .await
        .expect("goodbye");
    assert_eq!(listed(&mut client).await, [("echo".to_owned(), 1, 4, 3)]);

    // A worker that falls silent drops out after the reporting window.
    use taskstore::store::operations::OperationsStore;
    assert_eq!(
        store
            .workers(Duration::from_secs(30))
            .await
            .expect("workers")
            .len(),
        1
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        store
            .workers(Duration::from_millis(200))
            .await
            .expect("workers")
            .is_empty()
    );
    assert_eq!(
        store
            .forget_silent_workers(Duration::from_millis(200))
            .await
            .expect("sweep"),
        1
    );
    assert_eq!(
        store
            .workers(Duration::from_secs(30))
            .await
            .expect("workers")
            .len(),
        0
    );

    // Hostile reports change nothing.
    for (bad, field) in [
        (report("", &["echo"], 0, false), "worker_id"),
        (report(&"w".repeat(300), &["echo"], 0, false), "worker_id"),
        (report("w\n", &["echo"], 0, false), "worker_id"),
        (report("w3", &["bad tool"], 0, false), "tools"),
        (
            pb::HeartbeatRequest {
                consuming: None,
                tools: (0..1001).map(|n| format!("t{n}")).collect(),
                ..report("w3", &[], 0, false)
            },
            "tools",
        ),
        (
            pb::HeartbeatRequest {
                consuming: None,
                descriptions: vec![described("echo", "[1]")],
                ..report("w3", &["echo"], 0, false)
            },
            "descriptions",
        ),
        (
            pb::HeartbeatRequest {
                consuming: None,
                descriptions: vec![pb::ToolDescription {
                    task_support: 99,
                    ..described("echo", "")
                }],
                ..report("w3", &["echo"], 0, false)
            },
            "descriptions.task_support",
        ),
        (
            declaring(retry(Some(0), None, None)),
            "descriptions retry.max_attempts",
        ),
        (
            declaring(retry(Some(101), None, None)),
            "descriptions retry.max_attempts",
        ),
        (
            declaring(retry(None, Some((0, 1_000_000)), None)),
            "descriptions retry.backoff_base",
        ),
        (
            declaring(retry(None, Some((-1, 0)), None)),
            "descriptions.retry.backoff_base",
        ),
        (
            declaring(retry(None, None, Some((100_000, 0)))),
            "descriptions retry.backoff_max",
        ),
        (
            declaring(retry(None, Some((2, 0)), Some((1, 0)))),
            "descriptions retry.backoff_max",
        ),
        (limiting(0, "tenant"), "descriptions.concurrency max"),
        (limiting(10_001, "tenant"), "descriptions.concurrency max"),
        (
            limiting(2, "customer_id"),
            "descriptions.concurrency key term",
        ),
        (
            limiting(2, "arguments..a"),
            "descriptions.concurrency key term",
        ),
        (
            limiting(2, "arguments.a b"),
            "descriptions.concurrency key term",
        ),
        (
            limiting(2, &format!("arguments.{}", ["a"; 9].join("."))),
            "descriptions.concurrency key term",
        ),
        (
            limiting(2, &["tenant"; 9].join(",")),
            "descriptions.concurrency key has more",
        ),
        (
            limiting(2, &"x".repeat(257)),
            "descriptions.concurrency key must be at most",
        ),
        (rating(0, Some((1, 0)), ""), "descriptions.rate starts"),
        (
            rating(100_001, Some((1, 0)), ""),
            "descriptions.rate starts",
        ),
        (rating(5, None, ""), "descriptions.rate.per is required"),
        (rating(5, Some((0, 5_000_000)), ""), "descriptions.rate per"),
        (rating(5, Some((90_000, 0)), ""), "descriptions.rate per"),
        (rating(5, Some((-1, 0)), ""), "descriptions.rate.per"),
        (
            rating(5, Some((1, 0)), "nope"),
            "descriptions.rate key term",
        ),
        (fair("customer_id"), "descriptions.fairness_key key term"),
        (fair(&"x".repeat(257)), "descriptions.fairness_key key must"),
    ] {
        let refused = execution.heartbeat(bad).await.expect_err("refused");
        assert_eq!(refused.code(), Code::InvalidArgument, "{field}");
        assert!(
            refused.message().starts_with(field),
            "{}",
            refused.message()
        );
    }
    assert!(listed(&mut client).await.is_empty());

    // Descriptions go through the registry as reported (PostgreSQL keeps
    // them as JSON); a tool nobody described is listed with an open schema.
    execution
        .heartbeat(pb::HeartbeatRequest {
            consuming: None,
            descriptions: vec![described(
                "echo",
                r#"{"type":"object","required":["text"]}"#,
            )],
            ..report("w4", &["echo", "sleep"], 0, false)
        })
        .await
        .expect("heartbeat with descriptions");
    let tools = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("list tools")
        .into_inner()
        .tools;
    let echo = tools[0].description.clone().expect("echo described");
    let schema = r#"{"type":"object","required":["text"]}"#;
    // The same schema; PostgreSQL's jsonb does not keep the key order.
    let parsed = |text: &str| serde_json::from_str::<serde_json::Value>(text).expect("json");
    assert_eq!(parsed(&echo.input_schema_json), parsed(schema));
    assert_eq!(
        pb::ToolDescription {
            input_schema_json: schema.to_owned(),
            ..echo
        },
        described("echo", schema)
    );
    let sleep = tools[1].description.clone().expect("sleep listed");
    assert_eq!(echo.retry, None, "no policy declared, none listed");
    assert_eq!(
        (sleep.input_schema_json.as_str(), sleep.task_support),
        (r#"{"type":"object"}"#, pb::TaskSupport::Optional as i32)
    );

    // A declared retry policy goes through the registry and comes back as
    // declared (what is left out stays out).
    let policy = retry(Some(5), Some((0, 250_000_000)), Some((30, 0)));
    execution
        .heartbeat(pb::HeartbeatRequest {
            descriptions: vec![pb::ToolDescription {
                retry: Some(policy),
                ..described("zeta", "")
            }],
            ..report("w5", &["zeta"], 0, false)
        })
        .await
        .expect("heartbeat with a retry policy");
    let tools = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("list tools")
        .into_inner()
        .tools;
    let zeta = tools
        .iter()
        .find_map(|tool| tool.description.clone().filter(|d| d.name == "zeta"))
        .expect("zeta listed");
    assert_eq!(zeta.retry, Some(policy));

    // So does a concurrency limit, its key written the one way.
    execution
        .heartbeat(pb::HeartbeatRequest {
            descriptions: vec![pb::ToolDescription {
                concurrency: Some(pb::ConcurrencyLimit {
                    max: 3,
                    key: " tenant , arguments.customer.id".into(),
                }),
                rate: Some(pb::RateLimit {
                    starts: 20,
                    per: Some(prost_types::Duration {
                        seconds: 1,
                        nanos: 500_000_000,
                    }),
                    key: "tenant".into(),
                }),
                fairness_key: " arguments.customer.id ".into(),
                ..described("limited", "")
            }],
            ..report("w6", &["limited"], 0, false)
        })
        .await
        .expect("heartbeat with a concurrency limit");
    let tools = client
        .list_tools(pb::ListToolsRequest {})
        .await
        .expect("list tools")
        .into_inner()
        .tools;
    let limited = tools
        .iter()
        .find_map(|tool| tool.description.clone().filter(|d| d.name == "limited"))
        .expect("limited listed");
    assert_eq!(
        limited.concurrency,
        Some(pb::ConcurrencyLimit {
            max: 3,
            key: "tenant,arguments.customer.id".into(),
        })
    );
    assert_eq!(
        limited.rate,
        Some(pb::RateLimit {
            starts: 20,
            per: Some(prost_types::Duration {
                seconds: 1,
                nanos: 500_000_000,
            }),
            key: "tenant".into(),
        })
    );
    assert_eq!(limited.fairness_key, "arguments.customer.id");
    assert_eq!(zeta.concurrency, None, "none declared, none listed");
}

/// A report from `w3` describing `echo` rated `starts` per `per` (seconds,
/// nanos) per `key`.
fn rating(starts: u32, per: Option<(i64, i32)>, key: &str) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        consuming: None,
        descriptions: vec![pb::ToolDescription {
            rate: Some(pb::RateLimit {
                starts,
                per: per.map(|(seconds, nanos)| prost_types::Duration { seconds, nanos }),
                key: key.into(),
            }),
            ..described("echo", "")
        }],
        ..report("w3", &["echo"], 0, false)
    }
}

/// A report from `w3` describing `echo` limited to `max` per `key`.
fn limiting(max: u32, key: &str) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        consuming: None,
        descriptions: vec![pb::ToolDescription {
            concurrency: Some(pb::ConcurrencyLimit {
                max,
                key: key.into(),
            }),
            ..described("echo", "")
        }],
        ..report("w3", &["echo"], 0, false)
    }
}

fn report(worker: &str, tools: &[&str], busy: u32, stopping: bool) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        consuming: None,
        worker_id: worker.into(),
        tools: tools.iter().map(|t| t.to_string()).collect(),
        slots: 4,
        busy,
        stopping,
        descriptions: Vec::new(),
    }
}

/// A retry policy: attempts, backoff base and cap as (seconds, nanos).
fn retry(
    max_attempts: Option<u32>,
    base: Option<(i64, i32)>,
    max: Option<(i64, i32)>,
) -> pb::RetryPolicy {
    let duration = |(seconds, nanos)| prost_types::Duration { seconds, nanos };
    pb::RetryPolicy {
        max_attempts,
        backoff_base: base.map(duration),
        backoff_max: max.map(duration),
        retry_errors: None,
        retry_lost_workers: Some(false),
    }
}

/// A report from `w3` describing `echo` with `policy`.
fn declaring(policy: pb::RetryPolicy) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        consuming: None,
        descriptions: vec![pb::ToolDescription {
            retry: Some(policy),
            ..described("echo", "")
        }],
        ..report("w3", &["echo"], 0, false)
    }
}

/// A heartbeat declaring `echo` with fairness key `key`.
fn fair(key: &str) -> pb::HeartbeatRequest {
    pb::HeartbeatRequest {
        descriptions: vec![pb::ToolDescription {
            fairness_key: key.into(),
            ..described("echo", "")
        }],
        ..report("w3", &["echo"], 0, false)
    }
}

fn described(tool: &str, schema: &str) -> pb::ToolDescription {
    pb::ToolDescription {
        fairness_key: String::new(),
        rate: None,
        concurrency: None,
        retry: Default::default(),
        name: tool.to_owned(),
        title: "A title".to_owned(),
        description: "What it does".to_owned(),
        input_schema_json: schema.to_owned(),
        task_support: pb::TaskSupport::Required as i32,
    }
}

/// A dispatched task's arguments are checked against its tool's declared
/// schema before the task exists (issue 38); a tool without a schema, or
/// served by no worker now, takes any.
#[tokio::test]
async fn create_refuses_arguments_its_tools_schema_refuses() {
    use pb::task_execution_client::TaskExecutionClient;
    let store = Arc::new(common::pg_store(StoreConfig::default()).await);
    let (addr, _shutdown, _handle) =
        common::spawn_server(store.clone(), InputLimits::default()).await;
    let channel = common::grpc_channel(addr).await;
    let mut client = TaskStoreClient::new(channel.clone());
    TaskExecutionClient::new(channel)
        .heartbeat(pb::HeartbeatRequest {
            consuming: None,
            worker_id: "w1".into(),
            tools: vec!["count".into()],
            slots: 1,
            busy: 0,
            stopping: false,
            descriptions: vec![described(
                "count",
                r#"{"type":"object","properties":{"to":{"type":"integer"}},"required":["to"]}"#,
            )],
        })
        .await
        .expect("heartbeat");
    let create = |tool: &str, arguments: &str| pb::CreateTaskRequest {
        idempotency_key: None,
        no_expiry: false,
        poll_interval: None,
        task_id: None,
        session_id: None,
        ttl: None,
        request_id_json: "1".into(),
        request_json: format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{tool}","arguments":{arguments}}}}}"#
        ),
        dispatch: Some(pb::Dispatch {
            priority: Default::default(),
            start_at: None,
            start_after: None,
            tool: None,
            max_attempts: None,
        }),
    };
    let refused = client
        .create_task(create("count", r#"{"to":"three"}"#))
        .await
        .expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert!(
        refused.message().contains("arguments.to"),
        "{}",
        refused.message()
    );
    let listed = client
        .list_tasks(pb::ListTasksRequest {
            cursor: None,
            page_size: None,
            session_id: None,
            statuses: Vec::new(),
            tool: None,
        })
        .await
        .expect("list")
        .into_inner();
    assert!(listed.tasks.is_empty(), "no task was created");
    client
        .create_task(create("count", r#"{"to":3}"#))
        .await
        .expect("good arguments");
    client
        .create_task(create("unserved", r#"{"anything":[1]}"#))
        .await
        .expect("a tool nobody serves yet takes any arguments");
}
