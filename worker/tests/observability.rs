//! What operators see: one trace per task across the CLI, the service (and
//! its restart) and a worker, exported over OTLP to a receiver in the test;
//! and the Prometheus metrics of both binaries after a known workload.

#[path = "observability/collector.rs"]
mod collector;
mod common;
#[path = "observability/metrics.rs"]
mod metrics;

use std::process::Command;
use std::time::Duration;

use collector::{Collector, ReceivedSpan};
use common::{Env, eventually, get, result, taskstore_binary, text_of};
use taskstore_proto::v1 as pb;

const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const PRODUCER: i32 = 4;
const CONSUMER: i32 = 5;

/// The one span of `spans` that `matches`, named `what` in the failure.
fn one<'a>(
    spans: &'a [ReceivedSpan],
    what: &str,
    matches: impl Fn(&ReceivedSpan) -> bool,
) -> &'a ReceivedSpan {
    let found: Vec<_> = spans.iter().filter(|s| matches(s)).collect();
    assert_eq!(found.len(), 1, "one {what} span; the trace is {spans:#?}");
    found[0]
}

fn rpc<'a>(spans: &'a [ReceivedSpan], kind: i32, method: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.kind == kind && s.attribute("rpc.method") == Some(method))
        .collect()
}

fn is_ancestor(spans: &[ReceivedSpan], ancestor: &ReceivedSpan, of: &ReceivedSpan) -> bool {
    let mut current = of;
    while let Some(parent) = spans.iter().find(|s| s.span_id == current.parent_span_id) {
        if parent.span_id == ancestor.span_id {
            return true;
        }
        current = parent;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dispatched_task_is_one_connected_trace_across_a_service_restart() {
    let collector = Collector::start().await;
    let mut env = Env::new().await;
    let instance = |name: &str| {
        let mut vars = collector.vars();
        vars.push((
            "OTEL_RESOURCE_ATTRIBUTES".into(),
            format!("service.instance.id={name}"),
        ));
        vars
    };
    env.vars = instance("first");
    env.start_service(&[]);

    // The CLI creates the task while no worker serves the tool: the first
    // service's relay finds no queue for it and holds the job.
    let created = Command::new(taskstore_binary())
        .args([
            "create",
            "--endpoint",
            &env.endpoint,
            "--json",
            "--dispatch",
        ])
        .args(["--tool", "echo", "--arguments", r#"{"text":"traced"}"#])
        .envs(instance("cli"))
        .env("OTEL_SERVICE_NAME", "taskstore-cli")
        .output()
        .expect("run taskstore create");
    assert!(created.status.success(), "{created:?}");
    let created: serde_json::Value =
        serde_json::from_slice(&created.stdout).expect("create prints JSON");
    let task_id = created["taskId"].as_str().expect("taskId").to_owned();
    let client = env.client().await;
    eventually(
        "the first service holds the job",
        Duration::from_secs(20),
        || {
            let mut client = client.clone();
            let task_id = task_id.clone();
            async move {
                get(&mut client, &task_id).await.status_message.as_deref()
                    == Some("waiting for a worker that serves tool echo")
            }
        },
    )
    .await;

    // Restart: the job is published by the second service, in the trace
    // stored with the task.
    let mut first = env.service.take().expect("service");
    first.signal("-TERM");
    assert!(first.wait_exit(Duration::from_secs(20)).success());
    env.vars = instance("second");
    env.start_service(&[]);
    let endpoint = env.endpoint.clone();
    let (mut worker, mut logs) = env.start_worker_logged("worker-a", "echo", None, &endpoint, &[]);
    let mut client = env.client().await;
    let done = result(&mut client, &task_id, Duration::from_secs(30)).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    assert_eq!(text_of(&done.result_json), "traced");

    // The worker's lines about the task name it and its trace.
    let reported = logs.wait_for(Duration::from_secs(10), |event| {
        event["message"] == "attempt reported"
    });

    // Graceful stops flush what is left to export.
    worker.signal("-TERM");
    assert!(worker.wait_exit(Duration::from_secs(20)).success());
    let mut second = env.service.take().expect("service");
    second.signal("-TERM");
    assert!(second.wait_exit(Duration::from_secs(20)).success());

    let all = collector.spans();
    let create_call = one(&all, "CLI CreateTask", |s| {
        s.kind == CLIENT && s.attribute("rpc.method") == Some("CreateTask")
    });
    assert_eq!(create_call.resource["service.name"], "taskstore-cli");
    assert!(
        create_call.parent_span_id.is_empty(),
        "the CLI starts the trace"
    );
    let trace: Vec<ReceivedSpan> = all
        .iter()
        .filter(|s| s.trace_id == create_call.trace_id)
        .cloned()
        .collect();
    for span in &trace {
        assert!(
            span.parent_span_id.is_empty() == (span.span_id == create_call.span_id),
            "every span but the CLI's has a parent"
        );
        assert!(
            span.parent_span_id.is_empty()
                || trace.iter().any(|s| s.span_id == span.parent_span_id),
            "the parent of {span:#?} is in the trace (nothing missing)"
        );
    }

    assert_eq!(reported["task_id"], task_id.as_str());
    assert_eq!(reported["trace_id"], create_call.trace_id.as_str());
    assert_eq!(reported["mcp.tool.name"], "echo");

    let create = one(&trace, "server CreateTask", |s| {
        s.kind == SERVER && s.attribute("rpc.method") == Some("CreateTask")
    });
    assert_eq!(create.parent_span_id, create_call.span_id);
    assert_eq!(create.resource["service.instance.id"], "first");
    assert_eq!(create.attribute("rpc.system"), Some("grpc"));
    assert_eq!(
        create.attribute("rpc.service"),
        Some("mcp.tasks.v1.TaskStore")
    );
    assert_eq!(create.attribute("rpc.grpc.status_code"), Some("0"));
    assert_eq!(create.attribute("mcp.task.id"), Some(task_id.as_str()));

    let publish = one(&trace, "publish by the second service", |s| {
        s.kind == PRODUCER && s.resource["service.instance.id"] == "second"
    });
    assert_eq!(
        publish.parent_span_id, create.span_id,
        "joined after the restart"
    );
    assert_eq!(publish.attribute("messaging.system"), Some("rabbitmq"));
    assert_eq!(
        publish.attribute("messaging.destination.name"),
        Some(format!("{}.jobs", env.prefix).as_str())
    );
    assert_eq!(publish.attribute("mcp.tool.name"), Some("echo"));

    let process = one(&trace, "worker process", |s| s.kind == CONSUMER);
    assert_eq!(process.parent_span_id, publish.span_id);
    assert_eq!(process.resource["service.name"], "taskworker");
    assert_eq!(
        process.attribute("messaging.operation.type"),
        Some("process")
    );
    assert_eq!(process.attribute("mcp.task.id"), Some(task_id.as_str()));

    let run = one(&trace, "tool run", |s| s.name == "run echo");
    assert!(is_ancestor(&trace, process, run));

    for method in ["ClaimTask", "StoreTaskResult"] {
        let [call] = rpc(&trace, CLIENT, method)[..] else {
            panic!("one {method} call in {trace:#?}");
        };
        assert!(
            is_ancestor(&trace, process, call),
            "{method} under the worker's consume"
        );
        let [served] = rpc(&trace, SERVER, method)[..] else {
            panic!("one {method} served in {trace:#?}");
        };
        assert_eq!(served.parent_span_id, call.span_id);
        assert_eq!(served.resource["service.instance.id"], "second");
        assert_eq!(served.attribute("rpc.grpc.status_code"), Some("0"));
    }
    env.cleanup(&["echo"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_binaries_count_a_known_workload_on_metrics() {
    let mut env = Env::new().await;
    env.start_service(&[
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-snapshot-interval",
        "200ms",
    ]);
    let service_metrics = env
        .metrics_endpoint
        .clone()
        .expect("the service serves metrics");
    // The series the dashboards chart exist at zero from the start, rather
    // than saying "no data" on a healthy system.
    let fresh = metrics::scrape(&service_metrics).await;
    for (name, labels) in [
        ("taskstore_queue_blocked", &[][..]),
        ("taskstore_jobs_held_total", &[][..]),
        (
            "taskstore_poison_failures_total",
            &[("cause", "lease_expired")][..],
        ),
        (
            "taskstore_admission_refused_total",
            &[("limit", "create_rate")][..],
        ),
        (
            "taskstore_database_resource_refusals_total",
            &[("condition", "disk_full")][..],
        ),
    ] {
        assert_eq!(fresh.get(name, labels), Some(0.0), "{name} at start");
    }
    let endpoint = env.endpoint.clone();
    let (_worker, mut logs) = env.start_worker_logged(
        "worker-a",
        "echo,fail",
        None,
        &endpoint,
        &["--metrics-listen", "127.0.0.1:0"],
    );
    let serving = logs.wait_for(Duration::from_secs(30), |event| {
        event["message"] == "serving metrics on /metrics"
    });
    let worker_metrics = serving["addr"].as_str().expect("addr").to_owned();
    env.wait_for_consumers("echo", 1).await;
    env.wait_for_consumers("fail", 1).await;

    // Six tasks: three echoes, a failure, a flaky one that succeeds on its
    // second attempt, and one nobody runs that is cancelled.
    let mut client = env.client().await;
    let mut finished = Vec::new();
    for text in ["a", "b", "c"] {
        finished.push(
            common::dispatch(&mut client, "echo", serde_json::json!({"text": text}), None).await,
        );
    }
    let broken = serde_json::json!({"message": "boom"});
    finished.push(common::dispatch(&mut client, "fail", broken, None).await);
    let flaky = serde_json::json!({"retryable": true, "until_attempt": 1});
    finished.push(common::dispatch(&mut client, "fail", flaky, None).await);
    let mut undispatched = common::dispatch_request("echo", serde_json::json!({}), None);
    undispatched.dispatch = None;
    let idle = client
        .create_task(undispatched)
        .await
        .expect("create")
        .into_inner()
        .task_id;
    for id in &finished {
        result(&mut client, id, Duration::from_secs(30)).await;
    }
    client
        .cancel_task(pb::CancelTaskRequest {
            task_id: idle,
            session_id: None,
        })
        .await
        .expect("cancel");

    // The gauges follow at the next snapshot, and the outbox rows of
    // published jobs are deleted in the background, within moments.
    eventually(
        "the snapshot counts the finished tasks and an empty outbox",
        Duration::from_secs(10),
        || {
            let addr = service_metrics.clone();
            async move {
                let scraped = metrics::scrape(&addr).await;
                scraped.get("taskstore_tasks", &[("status", "completed")]) == Some(4.0)
                    && scraped.get("taskstore_outbox_jobs", &[]) == Some(0.0)
            }
        },
    )
    .await;
    let service = metrics::scrape(&service_metrics).await;
    let counted = |name: &str, labels: &[(&str, &str)]| service.value(name, labels);
    assert_eq!(
        counted("taskstore_tasks_created_total", &[("dispatched", "true")]),
        5.0
    );
    assert_eq!(
        counted("taskstore_tasks_created_total", &[("dispatched", "false")]),
        1.0
    );
    for (status, count) in [("completed", 4.0), ("failed", 1.0), ("cancelled", 1.0)] {
        assert_eq!(
            counted("taskstore_tasks_finished_total", &[("status", status)]),
            count,
            "{status}"
        );
        assert_eq!(
            counted("taskstore_tasks", &[("status", status)]),
            count,
            "{status}"
        );
    }
    assert_eq!(counted("taskstore_tasks", &[("status", "working")]), 0.0);
    assert_eq!(
        counted("taskstore_retries_total", &[("cause", "retryable_error")]),
        1.0
    );
    assert_eq!(counted("taskstore_claims_total", &[("tool", "echo")]), 3.0);
    assert_eq!(counted("taskstore_claims_total", &[("tool", "fail")]), 3.0);
    // Wait from creation to claim, for first attempts only.
    assert_eq!(
        counted("taskstore_queue_wait_seconds_count", &[("tool", "echo")]),
        3.0
    );
    assert_eq!(
        counted("taskstore_queue_wait_seconds_count", &[("tool", "fail")]),
        2.0
    );
    assert_eq!(
        counted("taskstore_jobs_published_total", &[]),
        6.0,
        "five jobs and one retry"
    );
    assert_eq!(counted("taskstore_outbox_jobs", &[]), 0.0);
    assert_eq!(counted("taskstore_queue_up", &[]), 1.0);
    let store_rpc = |method: &str| {
        let labels = [
            ("service", "mcp.tasks.v1.TaskStore"),
            ("method", method),
            ("code", "OK"),
        ];
        (
            service.value("taskstore_rpc_requests_total", &labels),
            service.value("taskstore_rpc_duration_seconds_count", &labels),
        )
    };
    assert_eq!(store_rpc("CreateTask"), (6.0, 6.0));
    assert_eq!(store_rpc("CancelTask"), (1.0, 1.0));
    assert_eq!(store_rpc("StoreTaskResult"), (5.0, 5.0));
    let release = [
        ("service", "mcp.tasks.v1.TaskExecution"),
        ("method", "ReleaseTask"),
        ("code", "OK"),
    ];
    assert_eq!(counted("taskstore_rpc_requests_total", &release), 1.0);
    assert!(
        service
            .get(
                "taskstore_rpc_requests_total",
                &[
                    ("service", "mcp.tasks.v1.TaskStore"),
                    ("method", "CreateTask"),
                    ("code", "Internal")
                ]
            )
            .is_none(),
        "no errors, so no error series"
    );

    // Probes beside the metrics: the worker has no gRPC port to probe.
    assert_eq!(metrics::http_get(&worker_metrics, "/livez").await.0, 200);
    assert_eq!(
        metrics::http_get(&worker_metrics, "/readyz").await.0,
        200,
        "consuming"
    );
    assert_eq!(metrics::http_get(&service_metrics, "/livez").await.0, 200);
    assert_eq!(
        metrics::http_get(&service_metrics, "/readyz").await.0,
        404,
        "the service is probed over gRPC health"
    );

    let worker = metrics::scrape(&worker_metrics).await;
    let counted = |name: &str, labels: &[(&str, &str)]| worker.value(name, labels);
    assert_eq!(counted("taskworker_slots", &[]), 4.0);
    assert_eq!(counted("taskworker_slots_busy", &[]), 0.0);
    assert_eq!(
        counted(
            "taskworker_jobs_total",
            &[("tool", "echo"), ("result", "claimed")]
        ),
        3.0
    );
    assert_eq!(
        counted(
            "taskworker_jobs_total",
            &[("tool", "fail"), ("result", "claimed")]
        ),
        3.0
    );
    for (tool, outcome, count) in [
        ("echo", "completed", 3.0),
        ("fail", "failed", 1.0),
        ("fail", "released", 1.0),
        ("fail", "completed", 1.0),
    ] {
        let labels = [("tool", tool), ("outcome", outcome)];
        assert_eq!(
            counted("taskworker_attempts_total", &labels),
            count,
            "{tool} {outcome}"
        );
        assert_eq!(
            counted("taskworker_attempt_duration_seconds_count", &labels),
            count
        );
    }
    env.cleanup(&["echo", "fail"]).await;
}
