//! A worker set up wrong says so instead of looking healthy (issue 38): one
//! pointed at a port that is not the gRPC API, and one consuming under
//! other broker names than the service publishes to, stop at once naming
//! what is wrong; one that cannot reach the broker is listed as not
//! consuming, and `taskstore status --tool` says its tasks wait.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::{self, Env, eventually};

/// Runs `taskworker` with `args` until it exits by itself; its status and
/// stderr.
fn worker_exits(env: &Env, args: &[&str]) -> (std::process::ExitStatus, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_taskworker"))
        .args(["--tools", "echo", "--worker-id", "misconfigured"])
        .args(args)
        .env("TASKWORKER_AMQP_URL", common::amqp_url())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn taskworker");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "a misconfigured worker keeps running (endpoint {})",
                env.endpoint
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().expect("stderr"), &mut stderr)
        .expect("stderr");
    (status, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_at_the_mcp_port_or_under_other_queue_names_stops_saying_why() {
    let mut env = Env::new().await;
    env.start_service(&["--mcp-listen", "127.0.0.1:0"]);
    let mcp = env.mcp_address();

    let (status, said) = worker_exits(&env, &["--endpoint", &mcp, "--queue-prefix", &env.prefix]);
    assert!(!status.success(), "{said}");
    assert!(said.contains("is not a taskstore service"), "{said}");
    assert!(said.contains("gRPC port"), "{said}");
    assert!(!said.contains("older version"), "{said}");

    let wrong = format!("{}x", env.prefix);
    let (status, said) = worker_exits(
        &env,
        &["--endpoint", &env.endpoint, "--queue-prefix", &wrong],
    );
    assert!(!status.success(), "{said}");
    assert!(
        said.contains(&format!("{}.", env.prefix)) && said.contains(&format!("{wrong}.")),
        "both prefixes named: {said}"
    );
    let (status, said) = worker_exits(
        &env,
        &[
            "--endpoint",
            &env.endpoint,
            "--queue-prefix",
            &env.prefix,
            "--queue-type",
            "classic",
        ],
    );
    assert!(!status.success(), "{said}");
    assert!(
        said.contains("classic") && said.contains("quorum"),
        "{said}"
    );

    // The CLI, pointed at the MCP port, says the same.
    let cli = Command::new(common::taskstore_binary())
        .args(["status", "--endpoint", &mcp])
        .output()
        .expect("taskstore status");
    let said = String::from_utf8_lossy(&cli.stderr);
    assert!(!cli.status.success());
    assert!(said.contains("not as the taskstore gRPC API"), "{said}");
    assert!(!said.contains("details are in its log"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_cannot_reach_the_broker_serves_nothing_and_status_says_so() {
    let mut env = Env::new().await;
    env.start_service(&[]);
    // A broker address where nothing listens.
    let nowhere = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let closed = format!(
        "amqp://guest:guest@{}/%2f",
        nowhere.local_addr().expect("addr")
    );
    drop(nowhere);
    let mut worker = Command::new(env!("CARGO_BIN_EXE_taskworker"))
        .args(["--endpoint", &env.endpoint, "--queue-prefix", &env.prefix])
        .args(["--tools", "echo", "--worker-id", "cut-off"])
        .env("TASKWORKER_AMQP_URL", &closed)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn taskworker");
    let status = |tool: &str| {
        Command::new(common::taskstore_binary())
            .args([
                "status",
                "--endpoint",
                &env.endpoint,
                "--tool",
                tool,
                "--json",
            ])
            .output()
            .expect("taskstore status")
    };
    eventually("the worker reports", Duration::from_secs(20), || async {
        let out = status("echo");
        let json: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        json["workers"]
            .as_array()
            .is_some_and(|workers| workers.iter().any(|w| w["workerId"] == "cut-off"))
    })
    .await;
    let out = status("echo");
    let json: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert!(!out.status.success(), "degraded: {json}");
    let worker_row = json["workers"]
        .as_array()
        .and_then(|w| w.iter().find(|w| w["workerId"] == "cut-off"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(worker_row["consuming"], false, "{json}");
    let problems = json["problems"].to_string();
    assert!(problems.contains("consumes its queue"), "{problems}");
    let _ = worker.kill();
    let _ = worker.wait();
}
