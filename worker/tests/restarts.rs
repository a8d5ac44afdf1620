//! Restarts of the shared PostgreSQL and RabbitMQ while tasks flow. These
//! disturb every other user of the two servers, so they run alone, after
//! the rest (`cargo nextest run --workspace --profile restarts`), and a
//! guard starts the server again however the test ends.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{Env, dispatch, result, text_of};
use serde_json::json;
use taskstore_proto::v1 as pb;

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .status()
        .unwrap_or_else(|err| panic!("{program}: {err}"));
    assert!(status.success(), "{program} {args:?} failed: {status:?}");
}

fn postgres_version() -> String {
    let versions = std::fs::read_dir("/etc/postgresql").expect("PostgreSQL is installed locally");
    versions
        .filter_map(Result::ok)
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .next()
        .expect("a PostgreSQL cluster")
}

/// Starts the server again when dropped, even after a failed assertion.
struct Restore(fn());

impl Drop for Restore {
    fn drop(&mut self) {
        (self.0)();
    }
}

fn start_rabbitmq() {
    let _ = Command::new("rabbitmqctl").arg("start_app").status();
    let _ = Command::new("rabbitmqctl")
        .args(["await_startup", "--timeout", "60"])
        .status();
}

fn start_postgres() {
    let version = postgres_version();
    let _ = Command::new("pg_ctlcluster")
        .args(["--skip-systemctl-redirect", &version, "main", "start"])
        .status();
}

/// Dispatches `count` echo tasks whose texts are `label 0`, `label 1`, …,
/// adding each (id, text) to `tasks`.
async fn dispatch_echoes(
    client: &mut pb::task_store_client::TaskStoreClient<tonic::transport::Channel>,
    tasks: &mut Vec<(String, String)>,
    label: &str,
    count: usize,
) {
    for i in 0..count {
        let text = format!("{label} {i}");
        tasks.push((
            dispatch(client, "echo", json!({"text": text}), None).await,
            text,
        ));
    }
}

/// Creates a task, retrying while the service answers UNAVAILABLE.
async fn dispatch_retrying(env: &Env, text: &str) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut client = env.client().await;
        let create = common::dispatch_request("echo", json!({ "text": text }), None);
        match client.create_task(create).await {
            Ok(task) => return task.into_inner().task_id,
            Err(status)
                if status.code() == tonic::Code::Unavailable
                    && tokio::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(status) => panic!("create failed: {status:?}"),
        }
    }
}

async fn assert_all_echoed(env: &Env, tasks: &[(String, String)]) {
    let mut client = env.client().await;
    for (id, text) in tasks {
        let done = result(&mut client, id, Duration::from_secs(120)).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed, "task {id}");
        assert_eq!(
            &text_of(&done.result_json),
            text,
            "the correct result for {id}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_a_rabbitmq_restart() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _a = env.start_worker("worker-a", "echo,sleep", None, &[]);
    let _b = env.start_worker("worker-b", "echo,sleep", None, &[]);
    let mut client = env.client().await;
    let mut tasks = Vec::new();
    dispatch_echoes(&mut client, &mut tasks, "before", 5).await;
    let slow = dispatch(&mut client, "sleep", json!({"ms": 4000}), None).await;

    let restore = Restore(start_rabbitmq);
    run("rabbitmqctl", &["stop_app"]);
    // The broker is down: creates still succeed, the outbox holds the jobs.
    dispatch_echoes(&mut client, &mut tasks, "during", 5).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(restore);

    dispatch_echoes(&mut client, &mut tasks, "after", 5).await;
    assert_all_echoed(&env, &tasks).await;
    let done = result(&mut client, &slow, Duration::from_secs(120)).await;
    assert_eq!(
        text_of(&done.result_json),
        "slept 4000 ms",
        "a task running through the restart finishes"
    );
    env.cleanup(&["echo", "sleep"]).await;
}

/// A key's concurrency limit (issue 40) holds through a broker restart: the
/// slots are PostgreSQL's, the broker's redeliveries are fenced at claim.
/// The recording tool (`common::runs`) allows 2 at once per customer, on two
/// workers of 4 slots; RabbitMQ stops for 2 s mid-run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keys_limit_holds_through_a_rabbitmq_restart() {
    const LIMIT: usize = 2;
    const TASKS: usize = 14;
    let mut env = Env::new().await;
    env.start_service(&[]);
    let tool = common::runs::RecordingTool::new(&env.prefix, LIMIT);
    let _a = env.start_worker("worker-a", "none", Some(tool.tools_file()), &[]);
    let _b = env.start_worker("worker-b", "none", Some(tool.tools_file()), &[]);
    env.wait_for_consumers("limited", 2).await;
    let mut client = env.client().await;
    let mut ids = Vec::new();
    for _ in 0..TASKS {
        ids.push(dispatch(&mut client, "limited", json!({"customer": "acme"}), None).await);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let restore = Restore(start_rabbitmq);
    run("rabbitmqctl", &["stop_app"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    drop(restore);

    for id in &ids {
        let done = result(&mut client, id, Duration::from_secs(120)).await;
        assert_eq!(done.status(), pb::TaskStatus::Completed, "{id}");
    }
    let runs = tool.runs(0);
    let most = runs.most_at_once("acme");
    eprintln!(
        "restarts: acme ran at most {most} at once, {} runs",
        runs.started
    );
    assert_eq!(runs.cut_short, 0, "no run was cut short");
    assert_eq!(runs.started, TASKS, "each task ran once");
    assert!(
        most <= LIMIT as i32,
        "acme ran {most} at once, over its limit of {LIMIT}"
    );
    assert_eq!(
        most, LIMIT as i32,
        "the backlog used the whole limit (else this proves nothing)"
    );
    env.cleanup(&["limited"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_survive_a_postgresql_restart() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _a = env.start_worker("worker-a", "echo,sleep", None, &[]);
    let _b = env.start_worker("worker-b", "echo,sleep", None, &[]);
    let mut tasks = Vec::new();
    for i in 0..5 {
        let text = format!("before {i}");
        tasks.push((dispatch_retrying(&env, &text).await, text));
    }
    let mut client = env.client().await;
    let slow = dispatch(&mut client, "sleep", json!({"ms": 3000}), None).await;

    let version = postgres_version();
    let restore = Restore(start_postgres);
    run(
        "pg_ctlcluster",
        &["--skip-systemctl-redirect", &version, "main", "restart"],
    );
    drop(restore);
    for i in 0..5 {
        let text = format!("after {i}");
        tasks.push((dispatch_retrying(&env, &text).await, text));
    }
    assert_all_echoed(&env, &tasks).await;
    let mut client = env.client().await;
    let done = result(&mut client, &slow, Duration::from_secs(120)).await;
    assert_eq!(done.status(), pb::TaskStatus::Completed);
    env.cleanup(&["echo", "sleep"]).await;
}

/// The broker's memory high watermark, as `rabbitmqctl` prints it: a
/// fraction (`0.4`) or `{absolute,Bytes}`.
fn memory_watermark() -> String {
    let output = Command::new("rabbitmqctl")
        .args(["eval", "vm_memory_monitor:get_vm_memory_high_watermark()."])
        .output()
        .expect("rabbitmqctl eval");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Sets the watermark back to what it was when dropped, even after a
/// failed assertion: the alarm the test raised is cleared.
struct RestoreWatermark(String);

impl Drop for RestoreWatermark {
    fn drop(&mut self) {
        let value = &self.0;
        let args: Vec<String> = match value
            .strip_prefix("{absolute,")
            .and_then(|rest| rest.strip_suffix('}'))
        {
            Some(bytes) => vec!["absolute".into(), bytes.trim().into()],
            None if value.parse::<f64>().is_ok() => vec![value.clone()],
            None => vec!["0.4".into()],
        };
        let _ = Command::new("rabbitmqctl")
            .arg("set_vm_memory_high_watermark")
            .args(&args)
            .status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_memory_alarm_holds_jobs_in_the_outbox_and_loses_nothing() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    let _a = env.start_worker("worker-a", "echo", None, &[]);
    let mut client = env.client().await;
    let mut tasks = Vec::new();
    dispatch_echoes(&mut client, &mut tasks, "before", 5).await;
    assert_all_echoed(&env, &tasks).await;

    let restore = RestoreWatermark(memory_watermark());
    run("rabbitmqctl", &["set_vm_memory_high_watermark", "0.0001"]);
    // The broker blocks a connection when it next publishes: creates still
    // succeed, the relay sees the block, and the jobs wait in the outbox.
    dispatch_echoes(&mut client, &mut tasks, "during", 20).await;
    common::eventually(
        "the relay sees the broker block it",
        Duration::from_secs(30),
        || {
            let env = &env;
            async move {
                let queue = common::load::status(&env.endpoint)
                    .await
                    .queue
                    .expect("queue");
                queue.condition.contains("the broker holds publishes")
                    && queue.condition_since.is_some()
            }
        },
    )
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = common::load::status(&env.endpoint).await;
    let waiting = during.outbox.expect("outbox").jobs;
    assert!(waiting >= 1, "the jobs wait in the outbox: {waiting}");

    drop(restore);
    common::eventually(
        "the relay sees the alarm clear",
        Duration::from_secs(30),
        || {
            let env = &env;
            async move {
                common::load::status(&env.endpoint)
                    .await
                    .queue
                    .expect("queue")
                    .condition
                    .is_empty()
            }
        },
    )
    .await;
    assert_all_echoed(&env, &tasks).await;
    let logged = |what: &str| {
        env.service_logs
            .lock()
            .expect("logs")
            .iter()
            .filter(|line| line.contains(what))
            .count()
    };
    assert_eq!(logged("job queue blocked"), 1, "said once");
    assert_eq!(logged("job queue unblocked"), 1, "and its end once");
    env.cleanup(&["echo"]).await;
}
